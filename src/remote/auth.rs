//! Request and response signatures: HMAC-SHA256 with the group's secret, over the
//! method, path, timestamp, nonce and body hash, in both directions.
//!
//! A request carries three headers:
//!
//! ```text
//! x-jobwheel-timestamp: <unix ms on the receiver's clock, as the sender estimates it>
//! x-jobwheel-nonce:     <32 hex digits, random>
//! x-jobwheel-signature: <hex HMAC-SHA256(secret, "jobwheel-v1\n" METHOD "\n" TARGET "\n" TS "\n" NONCE "\n" hex(SHA256(body)))>
//! ```
//!
//! TARGET is what the request is addressed to. To an executor instance, it is the
//! URL called: the instance's base address as the group knows it (lower case, no
//! final `/`) and the path, `http://10.0.0.5:9101/v1/run` ([`addressed`]); an
//! instance accepts only requests addressed to one of its own addresses, so a
//! request captured on its way to one instance does not pass at another of the
//! group (whose nonce cache has not seen it). To a registration endpoint, which is
//! not an instance, it is the path (`/v1/registry/beat`).
//!
//! The receiver refuses (401) a request with a header missing, a signature that does
//! not match, a timestamp more than the replay window away from its own clock, or a
//! nonce it has seen within the window. Every answer — refusals included — is
//! signed over `"jobwheel-v1-response\n" STATUS "\n" REQUEST-NONCE "\n" TS "\n"
//! hex(SHA256(body))` and carries the responder's clock in `x-jobwheel-timestamp`,
//! so a sender whose clock is off (an executor at +8 h) learns the receiver's clock
//! from an answer it can trust, and signs its next requests on it: clocks need not
//! agree, and a recorded answer cannot be replayed to another request.

use crate::error::{Error, Result};
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

/// Header with the signer's timestamp (unix ms).
pub const TIMESTAMP: &str = "x-jobwheel-timestamp";
/// Header with the request's nonce.
pub const NONCE: &str = "x-jobwheel-nonce";
/// Header with the signature.
pub const SIGNATURE: &str = "x-jobwheel-signature";

/// What a request to an instance signs as its target: the instance's base address
/// (`http://10.0.0.5:9101`, lower case, no final `/`) and `path`.
pub fn addressed(instance: &str, path: &str) -> String {
    format!(
        "{}{path}",
        instance.trim().trim_end_matches('/').to_ascii_lowercase()
    )
}

/// Shortest secret accepted, in bytes.
pub const MIN_SECRET_BYTES: usize = 16;

/// A group's shared secret. Never empty: a secret shorter than 16 bytes, or one of
/// the well-known sample values, is refused where it is given.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl Secret {
    /// Checks and wraps a secret.
    ///
    /// Errors: [`Error::Invalid`] on `field` when it is shorter than 16 bytes or is
    /// a sample value (`default_token`, `changeme`, `secret`…): there is no way to
    /// run without one.
    pub fn new(field: &'static str, secret: impl AsRef<[u8]>) -> Result<Secret> {
        let s = secret.as_ref();
        if s.len() < MIN_SECRET_BYTES {
            return Err(Error::invalid(
                field,
                format!("{} bytes", s.len()),
                format!(
                    "a group secret must be at least {MIN_SECRET_BYTES} bytes; generate one, e.g. `openssl rand -hex 32`"
                ),
            ));
        }
        let lower = String::from_utf8_lossy(s).to_ascii_lowercase();
        if [
            "default_token",
            "changeme",
            "secret",
            "password",
            "jobwheel",
        ]
        .iter()
        .any(|w| lower.trim().trim_end_matches(|c: char| c.is_ascii_digit()) == *w)
            || s.iter().all(|b| *b == s[0])
        {
            return Err(Error::invalid(
                field,
                "<redacted>",
                "a sample or repeated secret is refused; generate one, e.g. `openssl rand -hex 32`",
            ));
        }
        Ok(Secret(s.to_vec()))
    }

    /// The secret's bytes (to derive another from).
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    fn mac(&self) -> Hmac<Sha256> {
        Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes keys of any size")
    }

    /// The request signature, hex.
    pub fn sign_request(
        &self,
        method: &str,
        path: &str,
        timestamp: i64,
        nonce: &str,
        body: &[u8],
    ) -> String {
        let mut mac = self.mac();
        mac.update(&request_text(method, path, timestamp, nonce, body));
        hex::encode(mac.finalize().into_bytes())
    }

    /// The response signature, hex.
    pub fn sign_response(&self, status: u16, nonce: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac = self.mac();
        mac.update(&response_text(status, nonce, timestamp, body));
        hex::encode(mac.finalize().into_bytes())
    }

    /// Whether `signature` (hex) signs this request; compared in constant time.
    pub fn verify_request(
        &self,
        signature: &str,
        method: &str,
        path: &str,
        timestamp: i64,
        nonce: &str,
        body: &[u8],
    ) -> bool {
        let Ok(given) = hex::decode(signature) else {
            return false;
        };
        let mut mac = self.mac();
        mac.update(&request_text(method, path, timestamp, nonce, body));
        mac.verify_slice(&given).is_ok()
    }

    /// Whether `signature` (hex) signs this response; compared in constant time.
    pub fn verify_response(
        &self,
        signature: &str,
        status: u16,
        nonce: &str,
        timestamp: i64,
        body: &[u8],
    ) -> bool {
        let Ok(given) = hex::decode(signature) else {
            return false;
        };
        let mut mac = self.mac();
        mac.update(&response_text(status, nonce, timestamp, body));
        mac.verify_slice(&given).is_ok()
    }
}

fn request_text(method: &str, path: &str, timestamp: i64, nonce: &str, body: &[u8]) -> Vec<u8> {
    format!(
        "jobwheel-v1\n{method}\n{path}\n{timestamp}\n{nonce}\n{}",
        hex::encode(Sha256::digest(body))
    )
    .into_bytes()
}

fn response_text(status: u16, nonce: &str, timestamp: i64, body: &[u8]) -> Vec<u8> {
    format!(
        "jobwheel-v1-response\n{status}\n{nonce}\n{timestamp}\n{}",
        hex::encode(Sha256::digest(body))
    )
    .into_bytes()
}

/// A fresh nonce: 128 random bits, hex.
pub fn nonce() -> String {
    format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A signature header is missing or malformed.
    Unsigned,
    /// The signature does not match.
    BadSignature,
    /// The timestamp is outside the replay window of the receiver's clock.
    Skewed,
    /// The nonce was seen within the replay window.
    Replayed,
    /// The replay cache is full: refused rather than unchecked.
    Overloaded,
}

impl Refusal {
    /// The refusal's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Unsigned => "unsigned",
            Refusal::BadSignature => "bad_signature",
            Refusal::Skewed => "skewed_timestamp",
            Refusal::Replayed => "replayed",
            Refusal::Overloaded => "overloaded",
        }
    }
}

/// Checks requests against one secret: signature, replay window and nonce cache.
#[derive(Debug)]
pub struct Verifier {
    secret: Secret,
    window: Duration,
    max_nonces: usize,
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    by_nonce: HashMap<String, i64>,
    /// (expiry, nonce) in arrival order, for pruning.
    order: VecDeque<(i64, String)>,
}

impl Verifier {
    /// A verifier with a replay window of `window` either side of the receiver's
    /// clock, remembering at most `max_nonces` nonces.
    pub fn new(secret: Secret, window: Duration, max_nonces: usize) -> Verifier {
        Verifier {
            secret,
            window,
            max_nonces,
            seen: Mutex::default(),
        }
    }

    /// The secret, to sign answers with.
    pub fn secret(&self) -> &Secret {
        &self.secret
    }

    /// Checks one request at `now_ms` (the receiver's clock), signed for one of
    /// `targets` (the receiver's [`addressed`] URLs, or its path); records its nonce
    /// when it passes.
    #[allow(clippy::too_many_arguments)]
    pub fn check(
        &self,
        now_ms: i64,
        method: &str,
        targets: &[String],
        timestamp: Option<&str>,
        nonce: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
    ) -> std::result::Result<(), Refusal> {
        let (Some(ts), Some(nonce), Some(sig)) = (timestamp, nonce, signature) else {
            return Err(Refusal::Unsigned);
        };
        let Ok(ts) = ts.parse::<i64>() else {
            return Err(Refusal::Unsigned);
        };
        if nonce.len() < 16 || nonce.len() > 64 || !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Refusal::Unsigned);
        }
        if !targets
            .iter()
            .any(|t| self.secret.verify_request(sig, method, t, ts, nonce, body))
        {
            return Err(Refusal::BadSignature);
        }
        let window = self.window.as_millis() as i64;
        if (now_ms - ts).abs() > window {
            return Err(Refusal::Skewed);
        }
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        while let Some((expiry, _)) = seen.order.front() {
            if *expiry > now_ms {
                break;
            }
            let (_, old) = seen.order.pop_front().expect("front exists");
            seen.by_nonce.remove(&old);
        }
        if seen.by_nonce.contains_key(nonce) {
            return Err(Refusal::Replayed);
        }
        if seen.by_nonce.len() >= self.max_nonces {
            return Err(Refusal::Overloaded);
        }
        // A nonce is remembered until its timestamp leaves the window.
        let expiry = ts + window;
        seen.by_nonce.insert(nonce.to_string(), expiry);
        seen.order
            .push_back((expiry.max(now_ms), nonce.to_string()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> Secret {
        Secret::new("group.secret", "0123456789abcdef-fedcba9876543210").unwrap()
    }

    #[test]
    fn weak_secrets_are_refused() {
        for bad in [
            "",
            "short",
            "default_token",
            "aaaaaaaaaaaaaaaaaaaa",
            "changeme",
        ] {
            let e = Secret::new("group.secret", bad).unwrap_err().to_string();
            assert!(e.contains("group.secret"), "{e}");
            assert!(!e.contains(bad) || bad.is_empty() || bad == "short", "{e}");
        }
        assert_eq!(format!("{:?}", secret()), "Secret(<redacted>)");
    }

    #[test]
    fn a_signed_request_passes_once_and_every_tampering_is_refused() {
        let v = Verifier::new(secret(), Duration::from_secs(30), 100);
        let s = secret();
        let (ts, n, body) = (1_000_000, nonce(), br#"{"a":1}"#);
        let sig = s.sign_request("POST", "/v1/run", ts, &n, body);
        let check = |method: &str, path: &str, ts: i64, n: &str, sig: &str, body: &[u8], now| {
            v.check(
                now,
                method,
                &[path.to_string()],
                Some(&ts.to_string()),
                Some(n),
                Some(sig),
                body,
            )
        };
        assert_eq!(
            check("POST", "/v1/kill", ts, &n, &sig, body, ts),
            Err(Refusal::BadSignature)
        );
        assert_eq!(
            check("POST", "/v1/run", ts, &n, &sig, b"{}", ts),
            Err(Refusal::BadSignature)
        );
        assert_eq!(
            check("POST", "/v1/run", ts + 1, &n, &sig, body, ts),
            Err(Refusal::BadSignature)
        );
        assert_eq!(
            check("POST", "/v1/run", ts, &n, "00", body, ts),
            Err(Refusal::BadSignature)
        );
        assert_eq!(
            check("POST", "/v1/run", ts, &n, &sig, body, ts + 30_001),
            Err(Refusal::Skewed)
        );
        assert_eq!(
            check("POST", "/v1/run", ts, &n, &sig, body, ts + 29_000),
            Ok(())
        );
        assert_eq!(
            check("POST", "/v1/run", ts, &n, &sig, body, ts + 29_500),
            Err(Refusal::Replayed)
        );
        assert_eq!(
            v.check(
                ts,
                "POST",
                &["/v1/run".to_string()],
                None,
                Some(&n),
                Some(&sig),
                body
            ),
            Err(Refusal::Unsigned)
        );
        let other = Secret::new("g", "another-secret-of-enough-bytes").unwrap();
        let n2 = nonce();
        let forged = other.sign_request("POST", "/v1/run", ts, &n2, body);
        assert_eq!(
            check("POST", "/v1/run", ts, &n2, &forged, body, ts),
            Err(Refusal::BadSignature)
        );
    }

    #[test]
    fn a_request_passes_only_at_the_instance_it_is_addressed_to() {
        let s = secret();
        let (ts, n, body) = (1_000_000, nonce(), b"{}");
        let to_a = addressed("HTTP://10.0.0.5:9101/", "/v1/run");
        assert_eq!(to_a, "http://10.0.0.5:9101/v1/run");
        let sig = s.sign_request("POST", &to_a, ts, &n, body);
        let at = |me: &str| {
            Verifier::new(secret(), Duration::from_secs(30), 100).check(
                ts,
                "POST",
                &[addressed(me, "/v1/run")],
                Some(&ts.to_string()),
                Some(&n),
                Some(&sig),
                body,
            )
        };
        assert_eq!(at("http://10.0.0.6:9101"), Err(Refusal::BadSignature));
        assert_eq!(at("http://10.0.0.5:9101"), Ok(()));
    }

    #[test]
    fn the_nonce_cache_is_bounded_and_forgets_outside_the_window() {
        let v = Verifier::new(secret(), Duration::from_secs(1), 2);
        let s = secret();
        let send = |ts: i64, now: i64| {
            let n = nonce();
            let sig = s.sign_request("POST", "/v1/beat", ts, &n, b"");
            v.check(
                now,
                "POST",
                &["/v1/beat".to_string()],
                Some(&ts.to_string()),
                Some(&n),
                Some(&sig),
                b"",
            )
        };
        assert_eq!(send(0, 0), Ok(()));
        assert_eq!(send(0, 0), Ok(()));
        assert_eq!(send(0, 0), Err(Refusal::Overloaded));
        // Once the first two left the window there is room again.
        assert_eq!(send(1_500, 1_500), Ok(()));
    }

    #[test]
    fn responses_are_bound_to_their_request() {
        let s = secret();
        let sig = s.sign_response(200, "aaaa0000bbbb1111", 5, b"ok");
        assert!(s.verify_response(&sig, 200, "aaaa0000bbbb1111", 5, b"ok"));
        assert!(!s.verify_response(&sig, 200, "aaaa0000bbbb2222", 5, b"ok"));
        assert!(!s.verify_response(&sig, 401, "aaaa0000bbbb1111", 5, b"ok"));
    }
}
