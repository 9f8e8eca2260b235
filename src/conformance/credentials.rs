//! Checks of the runtime credentials: stored exactly, unique per kind and name, each
//! change audited once in the same step, concurrent adds of one name stored once.

use super::unique;
use crate::record::*;
use crate::store::{AuditQuery, JobStore};

/// Accounts and tokens read back exactly (any text in their fields), by kind then
/// name, stamped with the store's clock; a second add of a kind and name is refused
/// and leaves the first; the same name may be an account and a token; a removal says
/// whether there was one; each add and removal that happened appends its audit entry,
/// one that did not appends none; eight concurrent adds of one name store it once.
pub async fn credentials_are_kept(store: &dyn JobStore) {
    let actor = unique("admin");
    let name = unique("ops");
    let t0 = store.now().await.unwrap();
    let cred = |kind, hash: &str| Credential {
        kind,
        name: name.clone(),
        secret_hash: hash.to_string(),
        role: "operator".into(),
        groups: Some(vec!["billing".into(), "é <script>".into()]),
    };
    let audit = |action: &str| AuditEntry {
        actor: actor.clone(),
        action: action.into(),
        target: name.clone(),
        before: None,
        after: Some(serde_json::json!({"role": "operator"})),
    };
    let account = cred(
        CredentialKind::Account,
        "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA",
    );
    let token = cred(CredentialKind::Token, &"ab".repeat(32));
    assert!(
        store
            .add_credential(&account, &audit("account.add"))
            .await
            .unwrap()
    );
    assert!(
        !store
            .add_credential(
                &cred(CredentialKind::Account, "other"),
                &audit("account.add")
            )
            .await
            .unwrap(),
        "a second account of one name is refused"
    );
    assert!(
        store
            .add_credential(&token, &audit("token.add"))
            .await
            .unwrap(),
        "a token may have an account's name"
    );
    let t1 = store.now().await.unwrap();
    let mine: Vec<CredentialRecord> = store
        .credentials()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.credential.name == name)
        .collect();
    assert_eq!(
        mine.iter().map(|r| &r.credential).collect::<Vec<_>>(),
        vec![&account, &token],
        "read back exactly, by kind then name; the refused add changed nothing"
    );
    for r in &mine {
        assert!(
            r.created_at >= t0 && r.created_at <= t1,
            "stamped by the store's clock"
        );
    }
    let entries = store
        .audit(&AuditQuery::new(100).actor(Some(actor.clone())))
        .await
        .unwrap();
    assert_eq!(
        entries
            .iter()
            .map(|e| e.entry.action.as_str())
            .collect::<Vec<_>>(),
        vec!["token.add", "account.add"],
        "one audit entry per change made, none for the refused one"
    );
    assert!(
        store
            .remove_credential(CredentialKind::Account, &name, &audit("account.remove"))
            .await
            .unwrap()
    );
    assert!(
        !store
            .remove_credential(CredentialKind::Account, &name, &audit("account.remove"))
            .await
            .unwrap(),
        "removing what is not there says so"
    );
    let left: Vec<_> = store
        .credentials()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.credential.name == name)
        .map(|r| r.credential)
        .collect();
    assert_eq!(left, vec![token.clone()], "the token stays");
    assert_eq!(
        store
            .audit(&AuditQuery::new(100).actor(Some(actor.clone())))
            .await
            .unwrap()
            .len(),
        3,
        "the removal that happened is audited, the other is not"
    );
    assert!(
        store
            .remove_credential(CredentialKind::Token, &name, &audit("token.remove"))
            .await
            .unwrap()
    );

    // Eight adds of one name at once: one is stored, and audited once.
    let racer = unique("race");
    let adds = (0..8).map(|i| {
        let c = Credential {
            kind: CredentialKind::Token,
            name: racer.clone(),
            secret_hash: format!("{i:064}"),
            role: "viewer".into(),
            groups: None,
        };
        let a = AuditEntry {
            actor: racer.clone(),
            action: "token.add".into(),
            target: racer.clone(),
            before: None,
            after: None,
        };
        async move { store.add_credential(&c, &a).await.unwrap() }
    });
    let won = futures::future::join_all(adds).await;
    assert_eq!(
        won.iter().filter(|w| **w).count(),
        1,
        "one of eight adds stored it"
    );
    assert_eq!(
        store
            .audit(&AuditQuery::new(100).actor(Some(racer.clone())))
            .await
            .unwrap()
            .len(),
        1,
        "and only it is audited"
    );
    let a = AuditEntry {
        actor: racer.clone(),
        action: "token.remove".into(),
        target: racer.clone(),
        before: None,
        after: None,
    };
    assert!(
        store
            .remove_credential(CredentialKind::Token, &racer, &a)
            .await
            .unwrap()
    );
}
