#!/usr/bin/env python3
"""A handoff on the wire: decodes a loopback capture of ZooKeeper traffic and splits each
handoff into the server's part and the client's (docs/performance.md, "The leader handoff
against its floor").

    tcpdump -i lo -s 0 -B 65536 -w w4.pcap "tcp port $PORT" &
    BENCH_ONLY=W4 BENCH_N=10 ZK_CONNECT=127.0.0.1:$PORT target/release/examples/bench
    python3 examples/bench/zk_wire.py w4.pcap $PORT /w4-guard/           # the summary
    python3 examples/bench/zk_wire.py w4.pcap $PORT /w4-guard/ --show 3  # 3 rounds' frames
    # with BENCH_W4_TRACE=1 on the bench and its standard error in w4.err: each round's
    # client and server parts, between the bench's own stamps
    python3 examples/bench/zk_wire.py w4.pcap $PORT /w4- --trace w4.err

A handoff is a `delete` whose path contains the given part (`/w4-guard/`,
`/w4-candidate/`, `/w2-8/lock/`; `w4-delete-watch` for W4's delete + watch baseline). For
each it finds the deletion's notifications, the delete's reply, the successor (a notified
session whose next request is a `getData`: the new holder's own-node watch, which it sends
as it takes over; a notified session that lists instead is a waiter further back) and the
deleter's next request. Times are µs from the delete leaving the client, as the loopback
device saw each frame (a frame from the server: when the server wrote it; from a client:
when that client wrote it). Standard library only.
"""
import collections
import statistics
import struct
import sys

OPS = {1: 'create', 2: 'delete', 3: 'exists', 4: 'getData', 5: 'setData', 6: 'getACL',
       7: 'setACL', 8: 'getChildren', 9: 'sync', 11: 'ping', 12: 'getChildren2',
       13: 'check', 14: 'multi', 15: 'create2', 16: 'reconfig', 18: 'removeWatches',
       19: 'createContainer', 21: 'createTTL', 22: 'multiRead', 100: 'auth',
       101: 'setWatches', 105: 'setWatches2', 106: 'addWatch', 107: 'whoAmI',
       -11: 'closeSession'}
EVENTS = {1: 'NodeCreated', 2: 'NodeDeleted', 3: 'NodeDataChanged', 4: 'NodeChildrenChanged'}
# Requests whose body starts with a path.
PATH_FIRST = {1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 15, 18, 19, 21}
# Requests whose body ends in a watch flag.
WATCHING = {3, 4, 8, 12}


def packets(name):
    """(time in µs, link type, bytes) of each packet of a pcap file."""
    with open(name, 'rb') as f:
        data = f.read()
    magic = struct.unpack('<I', data[:4])[0]
    if magic not in (0xa1b2c3d4, 0xa1b23c4d):
        raise SystemExit(f'{name}: not a pcap file (magic {magic:#x}); use tcpdump -w')
    nano = magic == 0xa1b23c4d
    linktype = struct.unpack('<I', data[20:24])[0]
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack('<IIII', data[off:off + 16])
        off += 16
        yield sec * 1e6 + (frac / 1000 if nano else frac), linktype, data[off:off + incl]
        off += incl


def tcp(linktype, pkt):
    """(source port, destination port, seq, flags, payload) of a TCP packet, else None."""
    if linktype == 1:
        ethertype, ip = struct.unpack('>H', pkt[12:14])[0], pkt[14:]
    elif linktype == 113:
        ethertype, ip = struct.unpack('>H', pkt[14:16])[0], pkt[16:]
    else:
        raise SystemExit(f'link type {linktype}: capture on lo (tcpdump -i lo)')
    if ethertype == 0x0800 and ip[9] == 6:
        seg = ip[(ip[0] & 15) * 4:struct.unpack('>H', ip[2:4])[0]]
    elif ethertype == 0x86dd and ip[6] == 6:
        seg = ip[40:40 + struct.unpack('>H', ip[4:6])[0]]
    else:
        return None
    sport, dport, seq = struct.unpack('>HHI', seg[:8])
    return sport, dport, seq, seg[13], seg[(seg[12] >> 4) * 4:]


def string(b, o):
    n = struct.unpack('>i', b[o:o + 4])[0]
    return ('' if n < 0 else b[o + 4:o + 4 + n].decode('utf-8', 'replace')), o + 4 + max(n, 0)


class Frame:
    """One ZooKeeper frame: `kind` is req, reply or notify; `conn` the client's port."""

    def __init__(self, t, conn, kind, op, path, note=''):
        self.t, self.conn, self.kind, self.op, self.path, self.note = t, conn, kind, op, path, note


def frames(name, port):
    """Every frame of the connections to `port` that the capture saw from their start."""
    bufs, nxt, first, pending, out = {}, {}, {}, collections.defaultdict(dict), []
    for t, lt, pkt in packets(name):
        seg = tcp(lt, pkt)
        if not seg:
            continue
        sport, dport, seq, flags, payload = seg
        if port not in (sport, dport):
            continue
        up = dport == port
        key = (sport if up else dport, up)
        if flags & 0x02:  # SYN: a new connection; its first frame each way is the handshake
            nxt[key], bufs[key], first[key] = (seq + 1) & 0xffffffff, bytearray(), True
            continue
        if not payload or key not in nxt or seq != nxt[key]:
            continue  # before the capture, or a retransmission
        nxt[key] = (seq + len(payload)) & 0xffffffff
        buf = bufs[key]
        buf += payload
        while len(buf) >= 4 and len(buf) >= 4 + struct.unpack('>i', buf[:4])[0]:
            n = struct.unpack('>i', buf[:4])[0]
            fr = bytes(buf[4:4 + n])
            del buf[:4 + n]
            if first[key]:
                first[key] = False
                continue
            conn = key[0]
            if up:
                xid, op = struct.unpack('>ii', fr[:8])
                path = string(fr, 8)[0] if op in PATH_FIRST else ''
                note = 'watch' if op in WATCHING and fr[-1] == 1 else ''
                pending[conn][xid] = (OPS.get(op, str(op)), path)
                out.append(Frame(t, conn, 'req', OPS.get(op, str(op)), path, note))
            else:
                xid, zxid, err = struct.unpack('>iqi', fr[:16])
                if xid == -1:
                    typ = struct.unpack('>i', fr[16:20])[0]
                    out.append(Frame(t, conn, 'notify', EVENTS.get(typ, str(typ)), string(fr, 24)[0]))
                else:
                    op, path = pending[conn].pop(xid, ('?', ''))
                    out.append(Frame(t, conn, 'reply', op, path, f'err={err} zxid={zxid:#x}'))
    return out


def handoffs(fs, part, window=5000):
    """Each delete of a path containing `part`: its timeline and its parts."""
    for i, d in enumerate(fs):
        if d.kind != 'req' or d.op != 'delete' or part not in d.path:
            continue
        win = [f for f in fs[i + 1:i + 200] if f.t - d.t < window]
        notes = [f for f in win if f.kind == 'notify' and f.path == d.path]
        reply = next((f for f in win if f.kind == 'reply' and f.conn == d.conn and f.op == 'delete'), None)
        successor = None
        for n in notes:
            later = [f for f in win if f.conn == n.conn and f.kind == 'req' and f.t >= n.t]
            if n.conn != d.conn and later and later[0].op == 'getData':
                successor = (n, later[0])
        if successor is None:
            # A holder that arms no watch of its own sends nothing as it takes over: the
            # notified session that does not list.
            quiet = [n for n in notes if n.conn != d.conn and not any(
                f.conn == n.conn and f.kind == 'req' and f.t >= n.t and f.op != 'getData'
                and f.t - n.t < 1000 for f in win)]
            if len(quiet) == 1:
                successor = (quiet[0], None)
        others = [n for n in notes if n.conn != d.conn]
        deleter_next = next((f for f in win if f.conn == d.conn and f.kind == 'req'), None)
        yield d, win, {
            'notifications': len(notes),
            'first notification': notes[0].t - d.t if notes else None,
            'another session notified first': others[0].t - d.t if others else None,
            'successor notified': successor[0].t - d.t if successor else None,
            'successor place among notifications':
                1 + [n.conn for n in notes].index(successor[0].conn) if successor else None,
            'successor notified to its next request':
                successor[1].t - successor[0].t if successor and successor[1] else None,
            'delete reply': reply.t - d.t if reply else None,
            "deleter's next request after the reply":
                deleter_next.t - reply.t if deleter_next and reply else None,
        }


def traced(fs, trace):
    """Joins the bench's `w4-trace` lines (its own stamps, on the capture's clock) with the
    frames: for each round, from the stamp before the delete to the delete on the wire, on
    to the notification of the session that took over (the watcher's, for a baseline
    sample), and on to the stamp when that session's thread knew."""
    deletes = [(i, f) for i, f in enumerate(fs) if f.kind == 'req' and f.op == 'delete']
    parts = collections.defaultdict(lambda: collections.defaultdict(list))
    for line in open(trace):
        w = line.split()
        if len(w) != 4 or w[0] != 'w4-trace':
            continue
        style, t0, t1 = w[1], float(w[2]), float(w[3])
        base = style.endswith('-baseline')
        part = '/w4-delete-watch' if base else f'/w4-{style}/'
        d = next(((i, f) for i, f in deletes if f.t >= t0 - 20 and part in f.path
                  and (not base or f.path.endswith(part))), None)
        if d is None or d[1].t > t1:
            continue
        i, f = d
        _, _, got = next(handoffs(fs[i:], part if not base else f.path))
        took = got['another session notified first' if base else 'successor notified']
        if took is None:
            continue
        p = parts[style]
        p['stamp to the delete on the wire'].append(f.t - t0)
        p['delete to the notification'].append(took)
        p['notification to the stamp'].append(t1 - f.t - took)
        p['in all'].append(t1 - t0)
    for style, p in parts.items():
        print(f'== {style}')
        summary(p)


def summary(parts):
    for k, v in parts.items():
        v.sort()
        print(f'{k:<42} median {statistics.median(v):6.0f}  range {v[0]:.0f}-{v[-1]:.0f}  n={len(v)}')


def main():
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    name, port, part = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    fs = frames(name, port)
    if len(sys.argv) > 5 and sys.argv[4] == '--trace':
        return traced(fs, sys.argv[5])
    show = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == '--show' else 0
    parts = collections.defaultdict(list)
    for n, (d, win, got) in enumerate(handoffs(fs, part)):
        for k, v in got.items():
            if v is not None:
                parts[k].append(v)
        if n < show:
            print(f'--- delete {d.path}')
            for f in [d] + win[:40]:
                print(f'{f.t - d.t:8.0f} us  client {f.conn:<6} {f.kind:<6} {f.op:<13} {f.path} {f.note}')
    summary(parts)


if __name__ == '__main__':
    main()
