//! [`Actor`]: who makes a change, as the audit log names it.

/// Who makes a change: its name in the audit log, and the executor groups it is
/// limited to (if any).
///
/// Names have one form per kind of caller: `library` (a program embedding a
/// [`Scheduler`](crate::Scheduler)), `user:NAME` (an account of the admin API),
/// `token:NAME` (an API token), `cli:USER` (the command line against a store, as the
/// operating system's user).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actor {
    name: String,
    groups: Option<Vec<String>>,
}

impl Actor {
    /// A program that embeds the library.
    pub fn library() -> Actor {
        Actor::named("library".to_string())
    }

    /// An account of the admin API.
    pub fn user(name: &str) -> Actor {
        Actor::named(format!("user:{name}"))
    }

    /// An API token.
    pub fn token(name: &str) -> Actor {
        Actor::named(format!("token:{name}"))
    }

    /// The command line run by the operating system's user `user`.
    pub fn cli(user: &str) -> Actor {
        Actor::named(format!("cli:{user}"))
    }

    fn named(name: String) -> Actor {
        Actor { name, groups: None }
    }

    /// The same actor, limited to jobs of `groups` (and no local jobs).
    pub fn limited_to(mut self, groups: Vec<String>) -> Actor {
        self.groups = Some(groups);
        self
    }

    /// Its name in the audit log.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The executor groups it is limited to; `None`: every job.
    pub fn groups(&self) -> Option<&[String]> {
        self.groups.as_deref()
    }

    /// Whether it may see and act on a job of `group` (`None`: a job run by the
    /// scheduler's own handlers). An actor limited to groups has no local jobs.
    pub fn sees(&self, group: Option<&str>) -> bool {
        match (&self.groups, group) {
            (None, _) => true,
            (Some(gs), Some(g)) => gs.iter().any(|x| x == g),
            (Some(_), None) => false,
        }
    }
}
