//! Applications' Ed25519 keys, for HTTP interactions: the server signs what
//! it POSTs to an application's `interactions_endpoint_url` as Discord does
//! (`X-Signature-Ed25519`: the hex signature of the `X-Signature-Timestamp`
//! value followed by the body), and `/applications/@me` shows the public
//! half as `verify_key`. Each application's key is derived from the
//! deployment's key ([`UrlSigner::tag`]), so every node signs with the same
//! key and no private key is stored.

use protocol::ApplicationId;
use ring::signature::{Ed25519KeyPair, KeyPair};

use crate::attachments::UrlSigner;

/// The application's key pair.
pub fn key_pair(signer: &UrlSigner, app: ApplicationId) -> Ed25519KeyPair {
    let seed = hex::decode(signer.tag(&format!("application-ed25519\n{}", app.0))).expect("a tag is hex");
    Ed25519KeyPair::from_seed_unchecked(&seed[..32]).expect("an Ed25519 seed is 32 bytes")
}

/// The application's public key, as hex (`verify_key`).
pub fn verify_key(signer: &UrlSigner, app: ApplicationId) -> String {
    hex::encode(key_pair(signer, app).public_key().as_ref())
}

/// `X-Signature-Ed25519` for a request with `timestamp` and `body`.
pub fn sign(key: &Ed25519KeyPair, timestamp: &str, body: &[u8]) -> String {
    let mut m = Vec::with_capacity(timestamp.len() + body.len());
    m.extend_from_slice(timestamp.as_bytes());
    m.extend_from_slice(body);
    hex::encode(key.sign(&m).as_ref())
}

/// Whether `signature` (hex) signs `timestamp` + `body` under `verify_key`
/// (hex): what an application checks (tests use it as one would).
pub fn verify(verify_key: &str, timestamp: &str, body: &[u8], signature: &str) -> bool {
    let (Ok(key), Ok(sig)) = (hex::decode(verify_key), hex::decode(signature)) else { return false };
    let mut m = Vec::with_capacity(timestamp.len() + body.len());
    m.extend_from_slice(timestamp.as_bytes());
    m.extend_from_slice(body);
    ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, key).verify(&m, &sig).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_application_signs_with_its_own_key_and_every_node_derives_the_same() {
        let (a, b) = (UrlSigner::new(b"deployment", 60), UrlSigner::new(b"deployment", 60));
        let app = ApplicationId(42);
        assert_eq!(verify_key(&a, app), verify_key(&b, app), "two nodes of one deployment");
        assert_ne!(verify_key(&a, app), verify_key(&a, ApplicationId(43)));
        assert_ne!(verify_key(&a, app), verify_key(&UrlSigner::new(b"other", 60), app));
        let sig = sign(&key_pair(&a, app), "1700000000", b"{\"type\":1}");
        assert!(verify(&verify_key(&b, app), "1700000000", b"{\"type\":1}", &sig));
        assert!(!verify(&verify_key(&b, app), "1700000001", b"{\"type\":1}", &sig), "another timestamp");
        assert!(!verify(&verify_key(&b, app), "1700000000", b"{\"type\":2}", &sig), "another body");
        assert!(!verify(&verify_key(&a, ApplicationId(43)), "1700000000", b"{\"type\":1}", &sig), "another key");
        assert!(!verify("zz", "1", b"", &sig));
    }
}
