//! The owner of every long-lived job of the process: background threads (opening the
//! journal, loading the embedding model, writing memory access counts, and next the
//! follow-up scheduler) and the steps that must run before the process exits (flushing the
//! journal, the access counts, the audit trail). `shutdown` stops the jobs, waits for them
//! within a grace period, then runs the exit steps in the order they were registered — so
//! nothing a job or a call wrote is lost, and nothing is left running unowned.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Tells a job that the process is stopping.
#[derive(Debug, Default)]
pub struct Stop {
    stopped: Mutex<bool>,
    cond: Condvar,
}

impl Stop {
    pub fn is_stopped(&self) -> bool {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sleeps up to `period`; returns `true` (at once) when the process is stopping.
    pub fn wait(&self, period: Duration) -> bool {
        let guard = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = self
            .cond
            .wait_timeout_while(guard, period, |stopped| !*stopped)
            .unwrap_or_else(|e| e.into_inner());
        *guard
    }

    fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cond.notify_all();
    }
}

type ExitStep = Box<dyn FnOnce() + Send>;

/// See the module documentation. Shared as `Arc<Supervisor>`.
#[derive(Default)]
pub struct Supervisor {
    stop: Arc<Stop>,
    jobs: Mutex<Vec<(String, JoinHandle<()>)>>,
    exit_steps: Mutex<Vec<(String, ExitStep)>>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let jobs: Vec<String> = self
            .jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(n, _)| n.clone())
            .collect();
        f.debug_struct("Supervisor").field("jobs", &jobs).finish()
    }
}

impl Supervisor {
    pub fn new() -> Arc<Supervisor> {
        Arc::new(Supervisor::default())
    }

    /// Runs `job` on a thread of its own, named `ringfence-<name>`. A job that loops must
    /// watch its [`Stop`]. Returns `false` (and logs) when no thread could be started.
    pub fn spawn(&self, name: &str, job: impl FnOnce(&Stop) + Send + 'static) -> bool {
        let stop = self.stop.clone();
        if stop.is_stopped() {
            return false;
        }
        match std::thread::Builder::new()
            .name(format!("ringfence-{name}"))
            .spawn(move || job(&stop))
        {
            Ok(handle) => {
                self.jobs
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((name.to_owned(), handle));
                true
            }
            Err(e) => {
                tracing::warn!(job = name, error = %e, "cannot start a background job");
                false
            }
        }
    }

    /// Runs `tick` every `period` until the process stops.
    pub fn every(&self, name: &str, period: Duration, mut tick: impl FnMut() + Send + 'static) {
        self.spawn(name, move |stop| {
            while !stop.wait(period) {
                tick();
            }
        });
    }

    /// Runs `step` at shutdown, after the jobs stopped (steps run in registration order).
    pub fn at_exit(&self, name: &str, step: impl FnOnce() + Send + 'static) {
        self.exit_steps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((name.to_owned(), Box::new(step)));
    }

    /// Stops every job (waiting up to `grace` in all for them to end; a job still running
    /// then — a model read cannot be interrupted — is left to end with the process and
    /// logged), then runs the exit steps. Idempotent.
    pub fn shutdown(&self, grace: Duration) {
        self.stop.stop();
        let deadline = Instant::now() + grace;
        let jobs = std::mem::take(&mut *self.jobs.lock().unwrap_or_else(|e| e.into_inner()));
        for (name, handle) in jobs {
            while !handle.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if handle.is_finished() {
                if handle.join().is_err() {
                    tracing::error!(job = %name, "background job panicked");
                }
            } else {
                tracing::warn!(job = %name, "background job still running at exit; not waited for");
            }
        }
        let steps = std::mem::take(&mut *self.exit_steps.lock().unwrap_or_else(|e| e.into_inner()));
        for (name, step) in steps {
            tracing::debug!(step = %name, "exit step");
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(step)).is_err() {
                tracing::error!(step = %name, "exit step panicked");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn shutdown_stops_periodic_jobs_then_runs_exit_steps_in_order() {
        let sup = Supervisor::new();
        let ticks = Arc::new(AtomicUsize::new(0));
        let t = ticks.clone();
        sup.every("tick", Duration::from_millis(1), move || {
            t.fetch_add(1, Ordering::SeqCst);
        });
        let order = Arc::new(Mutex::new(Vec::new()));
        for step in ["journal", "memory", "audit"] {
            let order = order.clone();
            sup.at_exit(step, move || order.lock().unwrap().push(step));
        }
        while ticks.load(Ordering::SeqCst) < 3 {
            std::thread::sleep(Duration::from_millis(1));
        }
        sup.shutdown(Duration::from_secs(5));
        let after = ticks.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(ticks.load(Ordering::SeqCst), after, "the job kept running");
        assert_eq!(*order.lock().unwrap(), ["journal", "memory", "audit"]);
        // A second shutdown has nothing left to do, and new jobs are refused.
        sup.shutdown(Duration::from_secs(1));
        assert_eq!(order.lock().unwrap().len(), 3);
        assert!(!sup.spawn("late", |_| {}));
    }

    #[test]
    fn a_job_that_overruns_the_grace_is_left_and_exit_steps_still_run() {
        let sup = Supervisor::new();
        let release = Arc::new(Stop::default());
        let r = release.clone();
        sup.spawn("slow", move |_| {
            r.wait(Duration::from_secs(30));
        });
        let ran = Arc::new(AtomicUsize::new(0));
        let r2 = ran.clone();
        sup.at_exit("flush", move || {
            r2.fetch_add(1, Ordering::SeqCst);
        });
        let started = Instant::now();
        sup.shutdown(Duration::from_millis(50));
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        release.stop();
    }
}
