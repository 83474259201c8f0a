//! `W12`: what a login costs. `build()` (TCP connect, session handshake, the login, the
//! first session) against one Kerberized server that also serves clients without a login,
//! in the same run, interleaved: no login; a first Kerberos login from a keytab (an empty
//! memory cache each time: a ticket-granting ticket and a service ticket from the KDC, then
//! the GSSAPI exchange); later logins with the same keytab (the process's memory cache holds
//! the tickets: the GSSAPI exchange alone, what every reconnect costs); and a login from a
//! `kinit` credential-cache file holding the service ticket. Each client is closed after,
//! outside the timing.

use crate::*;
use report::Line;

#[cfg(not(feature = "kerberos"))]
pub(crate) fn w12(ctx: &Ctx) -> Res<()> {
    Line::new("W12", &ctx.target)
        .s("skipped", "built without the kerberos feature")
        .print();
    Ok(())
}

#[cfg(feature = "kerberos")]
pub(crate) fn w12(_ctx: &Ctx) -> Res<()> {
    use zkguard::testing::TestKdc;
    use zkguard::Kerberos;

    let n: usize = std::env::var("BENCH_LOGIN_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let kdc = TestKdc::shared()?;
    let cluster = TestCluster::builder()
        .kerberos(&kdc)
        .sasl_required(false)
        .start()?;
    let cs = cluster.connect_string();
    let keytab = kdc.add_principal("bench")?;
    let ccache = kdc.kinit("bench", None)?;
    let build = |login: Option<Kerberos>| -> Res<Duration> {
        let mut b = Client::builder(&cs).connect_timeout(Duration::from_secs(30));
        if let Some(k) = login {
            b = b.sasl_kerberos(k);
        }
        let (took, client) = report::timed(|| b.build());
        client?.close();
        Ok(took)
    };
    // Warm the server (and put the service ticket in the cache) before measuring.
    for _ in 0..20 {
        build(None)?;
        build(Some(Kerberos::new().keytab(&keytab)))?;
        build(Some(Kerberos::new().ccache(&ccache)))?;
    }
    let (mut plain, mut fresh, mut later, mut cached) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        plain.push(build(None)?);
        let empty = format!("MEMORY:zkguard-bench-{}-{i}", std::process::id());
        fresh.push(build(Some(Kerberos::new().keytab(&keytab).ccache(empty)))?);
        later.push(build(Some(Kerberos::new().keytab(&keytab)))?);
        cached.push(build(Some(Kerberos::new().ccache(&ccache)))?);
    }
    let base = report::p50(&mut plain);
    let target = "a Kerberized harness server (TestKdc on loopback)";
    Line::new("W12", target)
        .u("n", n as u64)
        .lat("no_login_", &mut plain)
        .lat("kerberos_first_", &mut fresh)
        .lat("kerberos_later_", &mut later)
        .lat("kerberos_ccache_file_", &mut cached)
        .f("ratio_first_p50", report::p50(&mut fresh) / base)
        .f("ratio_later_p50", report::p50(&mut later) / base)
        .f("ratio_ccache_file_p50", report::p50(&mut cached) / base)
        .print();
    Ok(())
}
