//! A job's place among its dependencies: its children, the jobs whose children it
//! is, and the releases queued for it.

use super::jobs::group_of;
use super::{Actor, Ops};
use crate::dependency::{ChildLink, ChildOn, MAX_GRAPH_READS, QueuedRelease};
use crate::error::Result;
use crate::job::JobId;
use crate::store::JobQuery;
use serde::{Deserialize, Serialize};
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
            parents,
            queued,
            parents_complete: complete,
        })
    }
}
