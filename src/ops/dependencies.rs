//! A job's place among its dependencies: its children, the jobs whose children it
//! is, and the releases queued for it.

use super::jobs::group_of;
use super::{Actor, Ops};
use crate::dependency::{ChildLink, ChildOn, MAX_GRAPH_READS, QueuedRelease, Release, UpstreamRun};
use crate::error::Result;
use crate::job::JobId;
use crate::record::AuditAction;
use crate::store::JobQuery;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::HashMap;

/// Most queued releases [`Ops::dependencies`] lists.
pub const MAX_QUEUED_SHOWN: usize = 1000;

/// A job whose children include the one asked about, and on which ends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct ParentLink {
    /// The parent.
    pub job: JobId,
    /// Which ends of its fires release the job.
    pub on: ChildOn,
}

/// What [`Ops::dependencies`] answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct Dependencies {
    /// The job.
    pub job: JobId,
    /// The jobs its fires release (its definition's `children`).
    pub children: Vec<ChildLink>,
    /// The parents whose releases of one instant it waits to have all of (its
    /// definition's `after`).
    pub after: Vec<JobId>,
    /// The window it joins its parents' releases over (its definition's
    /// `join_window`; absent: the exact instant).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub join_window: Option<crate::dependency::JoinWindow>,
    /// The jobs that list it as a child, those the caller may see, in id order.
    pub parents: Vec<ParentLink>,
    /// Releases waiting for it, oldest first (at most 1,000): fires of its parents
    /// it has yet to run. Those of parents the caller may not see are left out.
    pub queued: Vec<QueuedRelease>,
    /// Whether every stored job was read to find the parents (false past 10,000
    /// jobs: `parents` lists those found in the first 10,000 by id).
    pub parents_complete: bool,
}

impl Ops {
    /// The children, parents and queued releases of job `id`, as `actor` may see
    /// them. Finding the parents reads the stored jobs in id order, at most
    /// [`MAX_GRAPH_READS`] of them.
    ///
    /// Errors: [`Error::NotFound`](crate::Error::NotFound) for a job the actor does
    /// not see.
    pub async fn dependencies(&self, actor: &Actor, id: &JobId) -> Result<Dependencies> {
        let rec = self.visible(actor, id).await?;
        let mut parents = Vec::new();
        let mut seen: HashMap<JobId, bool> = HashMap::new();
        let mut after = None;
        let mut read = 0;
        let complete = loop {
            let page = self
                .store
                .list(&JobQuery::new(1000).after(after.clone()))
                .await?;
            read += page.items.len();
            for r in &page.items {
                seen.insert(r.job.id().clone(), actor.sees(group_of(&r.job)));
                if let Some(link) = r.job.children().iter().find(|c| &c.job == id)
                    && actor.sees(group_of(&r.job))
                {
                    parents.push(ParentLink {
                        job: r.job.id().clone(),
                        on: link.on,
                    });
                }
            }
            match page.items.last() {
                Some(last) if page.items.len() == 1000 => {
                    if read >= MAX_GRAPH_READS {
                        break false;
                    }
                    after = Some(last.job.id().clone());
                }
                _ => break true,
            }
        };
        let mut queued = Vec::new();
        for q in self.store.releases(Some(id), MAX_QUEUED_SHOWN).await? {
            let visible = match seen.get(&q.from.job) {
                Some(v) => *v,
                None => {
                    let v = self
                        .store
                        .get(&q.from.job)
                        .await?
                        .is_some_and(|r| actor.sees(group_of(&r.job)));
                    seen.insert(q.from.job.clone(), v);
                    v
                }
            };
            if visible {
                queued.push(q);
            }
        }
        Ok(Dependencies {
            job: id.clone(),
            children: rec.job.children().to_vec(),
            after: rec.job.after().to_vec(),
            join_window: rec.job.join_window().cloned(),
            parents,
            queued,
            parents_complete: complete,
        })
    }
}

impl Ops {
    /// Releases job `id` for the upstream instant `fire_at` in place of the parents
    /// of its `after` list that have not released that instant (each queued as
    /// released by `actor`, run 0), so it runs once for the instant as soon as it
    /// can; audited as `job.release`. Returns the parents released in its place
    /// (none when every parent had: the instant waits only for the job to be free).
    ///
    /// Errors: [`Error::NotFound`](crate::Error::NotFound) for a job the actor does
    /// not see; [`Error::Invalid`](crate::Error::Invalid) naming `job.after` for a
    /// job that waits for no parents (trigger it instead).
    pub async fn release_instant(
        &self,
        actor: &Actor,
        id: &JobId,
        fire_at: crate::time::Timestamp,
    ) -> Result<Vec<JobId>> {
        let rec = self.visible(actor, id).await?;
        if rec.job.after().is_empty() {
            return Err(crate::error::Error::invalid(
                "job.after",
                id,
                "the job waits for no parents: trigger it instead",
            ));
        }
        let queued = self.store.releases(Some(id), usize::MAX).await?;
        // A job that joins by a window is released for the window `fire_at` is in.
        let window = rec.job.join_window();
        let key = window.map_or(fire_at, |w| w.start(fire_at));
        let missing: Vec<JobId> = rec
            .job
            .after()
            .iter()
            .filter(|p| {
                !queued
                    .iter()
                    .any(|q| &q.from.job == *p && q.from.key() == key)
            })
            .cloned()
            .collect();
        let releases: Vec<Release> = missing
            .iter()
            .map(|p| {
                Release::new(
                    id.clone(),
                    UpstreamRun {
                        job: p.clone(),
                        fire_at,
                        run: crate::record::RunId(0),
                        status: crate::record::RunStatus::Succeeded,
                        depth: 1,
                        released_by: Some(actor.name().to_string()),
                        window: window.map(|w| w.start(fire_at)),
                    },
                )
            })
            .collect();
        let audit = super::entry(
            actor,
            AuditAction::JobRelease,
            id.as_str(),
            None,
            Some(json!({"fire_at": fire_at, "in_place_of": missing})),
        );
        self.store.queue_releases(&releases, Some(&audit)).await?;
        self.changed(None);
        Ok(missing)
    }

    /// Drops the releases queued for job `id` at the upstream instant `fire_at`: it
    /// does not run for that instant (unless a parent releases it again); audited as
    /// `job.skip`. Returns how many releases were dropped.
    ///
    /// Errors: [`Error::NotFound`](crate::Error::NotFound) for a job the actor does
    /// not see, and for an instant with no release queued.
    pub async fn skip_instant(
        &self,
        actor: &Actor,
        id: &JobId,
        fire_at: crate::time::Timestamp,
    ) -> Result<u64> {
        let rec = self.visible(actor, id).await?;
        // A job that joins by a window skips the window `fire_at` is in.
        let key = rec.job.join_window().map_or(fire_at, |w| w.start(fire_at));
        let audit = super::entry(
            actor,
            AuditAction::JobSkip,
            id.as_str(),
            None,
            Some(json!({"fire_at": fire_at})),
        );
        match self.store.drop_releases(id, key, Some(&audit)).await? {
            0 => Err(crate::error::Error::not_found(
                "queued release",
                format!("{id} at {fire_at}"),
            )),
            n => Ok(n),
        }
    }
}
