//! The server children of a run, and its `redis-server`.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Result;

use crate::child::ServerChild;
use crate::participants::ServerKind;
use crate::scenarios::backplane::Redis;
use crate::tls::TlsMaterial;

/// The server children of a run, started on first use and kept for the
/// rest of it (a child whose cell failed is stopped and started afresh),
/// and the `redis-server` of the backplane cells.
pub(super) struct Children {
    tls: Arc<TlsMaterial>,
    running: HashMap<&'static str, ServerChild>,
    redis: Option<Redis>,
}

impl Children {
    /// None running yet; the TLS participants' children get `tls`.
    pub(super) fn new(tls: TlsMaterial) -> Self {
        Self {
            tls: Arc::new(tls),
            running: HashMap::new(),
            redis: None,
        }
    }

    /// The run's `redis-server`, started on first use.
    pub(super) fn redis(&mut self) -> Result<&Redis> {
        if self.redis.is_none() {
            self.redis = Some(Redis::start()?);
        }
        Ok(self.redis.as_ref().expect("started just above"))
    }

    /// The child of `kind`, started if none runs.
    pub(super) fn get(&mut self, kind: ServerKind) -> Result<&mut ServerChild> {
        if !self.running.contains_key(kind.name()) {
            let tls = match kind {
                ServerKind::Echo(participant) if participant.uses_tls() => {
                    Some(Arc::clone(&self.tls))
                }
                _ => None,
            };
            self.running
                .insert(kind.name(), ServerChild::spawn(kind, tls)?);
        }
        Ok(self
            .running
            .get_mut(kind.name())
            .expect("inserted just above"))
    }

    /// Stops the child of `kind`, if one runs; the next `get` starts another.
    pub(super) fn stop(&mut self, kind: ServerKind) {
        self.running.remove(kind.name());
    }
}
