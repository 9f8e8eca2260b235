use super::unique;
use crate::lock::{Lease, LockProvider, LockRequest};
use std::time::Duration;

fn req(key: &str, ms: u64) -> LockRequest {
    LockRequest {
        key: key.to_string(),
        ttl: Duration::from_millis(ms),
    }
}

async fn one(locks: &dyn LockProvider, owner: &str, key: &str, ms: u64) -> Option<Lease> {
    let mut got = locks
        .acquire(owner, &[req(key, ms)])
        .await
        .expect("acquire");
    assert_eq!(got.len(), 1, "acquire returns one result per request");
    got.pop().unwrap()
}

/// Many owners racing for one key: exactly one wins.
pub async fn exclusive_under_contention(locks: &dyn LockProvider) {
    let key = unique("contended");
    let owners: Vec<String> = (0..32).map(|i| format!("owner-{i}")).collect();
    let attempts = owners.iter().map(|o| one(locks, o, &key, 10_000));
    let results = futures::future::join_all(attempts).await;
    let winners: Vec<&Lease> = results.iter().flatten().collect();
    assert_eq!(
        winners.len(),
        1,
        "exactly one of 32 concurrent acquirers must win: {winners:?}"
    );
    assert!(winners[0].token > 0, "tokens start above zero");
    assert_eq!(winners[0].key, key);
    assert!(locks.release(&[winners[0].clone()]).await.unwrap()[0]);
}

/// Every grant of a key has a larger token than the one before.
pub async fn tokens_strictly_increase(locks: &dyn LockProvider) {
    let key = unique("tokens");
    let mut last = 0;
    for i in 0..5 {
        let lease = one(locks, &format!("o{}", i % 2), &key, 10_000)
            .await
            .expect("a released key is granted again");
        assert!(
            lease.token > last,
            "token {} must exceed {last}",
            lease.token
        );
        last = lease.token;
        assert_eq!(locks.release(&[lease]).await.unwrap(), [true]);
    }
}

/// A held key is granted to nobody else, nor again to its holder.
pub async fn held_keys_are_not_granted_again(locks: &dyn LockProvider) {
    let key = unique("held");
    let a = one(locks, "a", &key, 10_000).await.expect("free key");
    assert!(
        one(locks, "b", &key, 10_000).await.is_none(),
        "another owner got a held key"
    );
    assert!(
        one(locks, "a", &key, 10_000).await.is_none(),
        "the holder got its held key twice"
    );
    locks.release(&[a]).await.unwrap();
}

/// Renew acts only for the holder with its token, keeps the token and extends expiry.
pub async fn renew_is_owner_and_token_checked(locks: &dyn LockProvider) {
    let key = unique("renew");
    let a = one(locks, "a", &key, 300).await.expect("free key");
    let wrong_owner = Lease {
        owner: "b".into(),
        ..a.clone()
    };
    let wrong_token = Lease {
        token: a.token + 1,
        ..a.clone()
    };
    let got = locks
        .renew(
            &[wrong_owner, wrong_token, a.clone()],
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(got.len(), 3);
    assert!(got[0].is_none(), "renewed for a different owner");
    assert!(got[1].is_none(), "renewed with a different token");
    let renewed = got[2].clone().expect("the holder renews");
    assert_eq!(renewed.token, a.token, "renew keeps the token");
    assert!(
        renewed.expires_at > a.expires_at,
        "renew extends the expiry"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        one(locks, "b", &key, 1000).await.is_none(),
        "a renewed lease expired at its original ttl"
    );
    assert!(locks.release(&[renewed]).await.unwrap()[0]);
}

/// Release acts only for the holder with its token.
pub async fn release_is_owner_and_token_checked(locks: &dyn LockProvider) {
    let key = unique("release");
    let a = one(locks, "a", &key, 10_000).await.expect("free key");
    let wrong_owner = Lease {
        owner: "b".into(),
        ..a.clone()
    };
    let wrong_token = Lease {
        token: a.token.saturating_sub(1),
        ..a.clone()
    };
    assert_eq!(
        locks.release(&[wrong_owner, wrong_token]).await.unwrap(),
        [false, false]
    );
    assert!(
        one(locks, "b", &key, 10_000).await.is_none(),
        "a refused release freed the key"
    );
    assert_eq!(
        locks.release(std::slice::from_ref(&a)).await.unwrap(),
        [true]
    );
    let b = one(locks, "b", &key, 10_000)
        .await
        .expect("a released key is free");
    assert_eq!(
        locks.release(&[a]).await.unwrap(),
        [false],
        "a stale lease released a new holder's lock"
    );
    assert_eq!(locks.release(&[b]).await.unwrap(), [true]);
}

/// An expired lease frees its key; the old holder can neither renew nor release.
pub async fn leases_expire(locks: &dyn LockProvider) {
    let key = unique("expiry");
    let a = one(locks, "a", &key, 200).await.expect("free key");
    tokio::time::sleep(Duration::from_millis(450)).await;
    let b = one(locks, "b", &key, 10_000)
        .await
        .expect("an expired key is free");
    assert!(
        b.token > a.token,
        "the new grant's token must exceed the expired one's"
    );
    assert_eq!(
        locks
            .renew(std::slice::from_ref(&a), Duration::from_secs(10))
            .await
            .unwrap(),
        [None]
    );
    assert_eq!(locks.release(&[a]).await.unwrap(), [false]);
    assert_eq!(locks.release(&[b]).await.unwrap(), [true]);
}

/// Idle keys are forgotten, held ones never, and a forgotten key granted again still
/// gets a greater token. Redis forgets by expiry instead (a key's counter lives a day
/// past its lease), so there the call forgets nothing and only the tokens are checked.
pub async fn idle_keys_are_forgotten_and_tokens_still_increase(locks: &dyn LockProvider) {
    let (idle, held) = (unique("idle"), unique("kept"));
    let old = one(locks, "a", &idle, 10_000).await.expect("free key");
    assert_eq!(
        locks.release(std::slice::from_ref(&old)).await.unwrap(),
        [true]
    );
    let holder = one(locks, "a", &held, 10_000).await.expect("free key");
    // The lock server's clock moves past the grants' microseconds.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let forgotten = locks.forget_idle(Duration::ZERO).await.unwrap();
    if locks.name() != "redis" {
        assert!(
            forgotten >= 1,
            "{}: the released key is idle and must be forgotten",
            locks.name()
        );
    }
    assert!(
        one(locks, "b", &held, 10_000).await.is_none(),
        "a held key is never forgotten"
    );
    let renewed = locks
        .renew(std::slice::from_ref(&holder), Duration::from_secs(10))
        .await
        .unwrap();
    assert!(
        matches!(renewed.as_slice(), [Some(l)] if l.token == holder.token),
        "a held key's lease survives and renews: {renewed:?}"
    );
    let again = one(locks, "b", &idle, 10_000)
        .await
        .expect("a forgotten key is free");
    assert!(
        again.token > old.token,
        "a forgotten key's next token {} must exceed its last {}",
        again.token,
        old.token
    );
    // Nothing newer than the cutoff goes: with a day's margin neither key is touched.
    assert_eq!(locks.release(&[again]).await.unwrap(), [true]);
    let kept = locks
        .forget_idle(Duration::from_secs(86_400))
        .await
        .unwrap();
    assert_eq!(kept, 0, "keys granted within the last day are kept");
    assert_eq!(locks.release(&[holder]).await.unwrap(), [true]);
}

/// Batched calls answer each key on its own, in request order.
pub async fn batches_are_independent(locks: &dyn LockProvider) {
    let prefix = unique("batch");
    let keys: Vec<String> = (0..50).map(|i| format!("{prefix}-{i}")).collect();
    let held: Vec<LockRequest> = keys.iter().step_by(5).map(|k| req(k, 10_000)).collect();
    let others = locks.acquire("other", &held).await.unwrap();
    assert!(others.iter().all(Option::is_some));
    let all: Vec<LockRequest> = keys.iter().map(|k| req(k, 10_000)).collect();
    let got = locks.acquire("me", &all).await.unwrap();
    assert_eq!(got.len(), 50);
    for (i, g) in got.iter().enumerate() {
        assert_eq!(
            g.is_some(),
            i % 5 != 0,
            "key {i}: held by another owner iff i % 5 == 0"
        );
        if let Some(l) = g {
            assert_eq!(l.key, keys[i], "results are in request order");
            assert_eq!(l.owner, "me");
        }
    }
    let mine: Vec<Lease> = got.into_iter().flatten().collect();
    let renewed = locks.renew(&mine, Duration::from_secs(10)).await.unwrap();
    assert!(
        renewed
            .iter()
            .zip(&mine)
            .all(|(r, m)| r.as_ref().is_some_and(|r| r.key == m.key))
    );
    let mut mixed = mine.clone();
    mixed.push(others[0].clone().unwrap());
    mixed[0].token += 1000;
    let released = locks.release(&mixed).await.unwrap();
    assert!(!released[0], "a wrong token must not release");
    assert!(released[1..].iter().all(|r| *r));
    let mut rest: Vec<Lease> = others.into_iter().flatten().skip(1).collect();
    rest.push(mine[0].clone());
    assert!(locks.release(&rest).await.unwrap().iter().all(|r| *r));
}
