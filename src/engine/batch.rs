//! Batching of store and lock calls.
//!
//! A [`Batcher`] owns one task that takes every request queued while its previous
//! call was in flight (up to `max`), makes one call for all of them, and answers each
//! caller. Under load fires that come due together share one round trip; when idle a
//! lone request goes out at once, so batching adds no latency.

use crate::error::Error;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

type Reply<R> = oneshot::Sender<Result<R, Arc<Error>>>;

/// A handle to a batching task; cheap to clone.
pub(crate) struct Batcher<Q, R> {
    tx: mpsc::UnboundedSender<(Q, Reply<R>)>,
}

impl<Q, R> Clone for Batcher<Q, R> {
    fn clone(&self) -> Self {
        Batcher {
            tx: self.tx.clone(),
        }
    }
}

impl<Q: Send + 'static, R: Send + 'static> Batcher<Q, R> {
    /// Spawns the task. `call` gets a batch and must answer with one result per
    /// request, in order. The task ends when every handle is dropped.
    pub(crate) fn spawn<F, Fut>(max: usize, call: F) -> Self
    where
        F: Fn(Vec<Q>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<R>, Error>> + Send,
    {
        Self::spawn_parallel(max, 1, call)
    }

    /// [`spawn`](Self::spawn) with up to `parallel` calls in flight: the next batch
    /// (what queued meanwhile) goes out while the previous one is still in the
    /// store, so a node's writes use more than one of the database's cores. Only
    /// for calls whose batches never wait for each other's rows (a node's finishes
    /// write the rows of runs it holds, each in one batch).
    pub(crate) fn spawn_parallel<F, Fut>(max: usize, parallel: usize, call: F) -> Self
    where
        F: Fn(Vec<Q>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<R>, Error>> + Send,
    {
        let (tx, mut rx) = mpsc::unbounded_channel::<(Q, Reply<R>)>();
        let call = Arc::new(call);
        let slots = Arc::new(tokio::sync::Semaphore::new(parallel.max(1)));
        tokio::spawn(async move {
            let mut buf = Vec::with_capacity(max);
            loop {
                // A call slot first, then what queued while waiting for it.
                let Ok(slot) = slots.clone().acquire_owned().await else {
                    return;
                };
                if rx.recv_many(&mut buf, max).await == 0 {
                    return;
                }
                let (reqs, replies): (Vec<Q>, Vec<Reply<R>>) = buf.drain(..).unzip();
                let call = call.clone();
                tokio::spawn(async move {
                    answer(call(reqs).await, replies);
                    drop(slot);
                });
            }
        });
        Batcher { tx }
    }

    /// Queues one request and waits for its answer.
    pub(crate) async fn call(&self, q: Q) -> Result<R, Arc<Error>> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send((q, tx))
            .map_err(|_| Arc::new(Error::Stopped))?;
        rx.await.map_err(|_| Arc::new(Error::Stopped))?
    }
}

/// Answers each caller of a batch with its result, or every caller with the call's
/// error.
fn answer<R>(result: Result<Vec<R>, Error>, replies: Vec<Reply<R>>) {
    let n = replies.len();
    match result {
        Ok(results) if results.len() == n => {
            for (reply, r) in replies.into_iter().zip(results) {
                let _ = reply.send(Ok(r));
            }
        }
        Ok(results) => {
            let e = Arc::new(Error::invalid(
                "backend.batch",
                results.len(),
                format!(
                    "a batch call answered {} results for {n} requests",
                    results.len()
                ),
            ));
            for reply in replies {
                let _ = reply.send(Err(e.clone()));
            }
        }
        Err(e) => {
            let e = Arc::new(e);
            for reply in replies {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}
