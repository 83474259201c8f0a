//! TEMPORARY stub (not committed): replaced by the DIGEST-MD5 mechanism.
pub(crate) struct DigestMd5Client;
impl DigestMd5Client {
    pub(crate) fn new(_u: &str, _p: &str) -> Self {
        DigestMd5Client
    }
    pub(crate) fn initial_response(&self) -> Vec<u8> {
        Vec::new()
    }
    pub(crate) fn step(&mut self, _c: &[u8]) -> Result<Option<Vec<u8>>, String> {
        Err("stub".into())
    }
}
