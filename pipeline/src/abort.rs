//! Stopping every worker of a process when one panics.
//!
//! A stage's own panic is caught by the engine and recorded as its instance's failure; a
//! panic anywhere else on a worker thread (an operator's bookkeeping, the driver's code) is a
//! bug, and without this the other workers would wait forever for its progress: timely steps
//! a worker's dataflows after its closure returns until they complete, and a dataflow whose
//! operator panicked never does. With [`guarded`] the run ends with
//! [`crate::driver::DriverError::Worker`] instead (what completed is in the store); in a
//! cluster that process then exits, and the others stop when its connections close
//! (`cluster`). Worker 0 waiting in `watch` for the file's next save checks it too, at each
//! poll of the file (300 ms).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use timely::worker::Worker;

/// Raised when a worker thread of this process panics; every worker checks it where it waits.
#[derive(Clone, Default)]
pub(crate) struct Abort(Arc<AtomicBool>);

impl Abort {
    fn raise(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether a worker of this process has panicked.
    pub(crate) fn raised(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Runs `body` on `worker`. A panic in it (in an operator while it steps, or in its own code)
/// raises `abort` and becomes `Err` with the panic's message; once `abort` is raised, here or
/// on another worker, the worker's dataflows are dropped so that timely's loop after the
/// worker's closure ends.
pub(crate) fn guarded<T>(
    worker: &mut Worker,
    abort: &Abort,
    body: impl FnOnce(&mut Worker) -> T,
) -> Result<T, String> {
    let index = worker.index();
    let outcome = catch_unwind(AssertUnwindSafe(|| body(&mut *worker))).map_err(|p| {
        abort.raise();
        format!(
            "worker {index}: {}",
            crate::engine::panic_message(p.as_ref())
        )
    });
    if abort.raised() {
        for id in worker.installed_dataflows() {
            worker.drop_dataflow(id);
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use timely::container::CapacityContainerBuilder;
    use timely::dataflow::channels::pact::Pipeline;
    use timely::dataflow::operators::generic::operator::Operator;
    use timely::dataflow::operators::{Input, Probe};
    use timely::dataflow::{InputHandle, ProbeHandle};

    #[test]
    fn a_panic_in_an_operator_stops_every_worker() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let abort = Abort::default();
            let guards = timely::execute(timely::Config::process(2), move |worker| {
                let abort = abort.clone();
                guarded(worker, &abort, |worker| {
                    let mut input = InputHandle::<u64, CapacityContainerBuilder<Vec<u64>>>::new();
                    let probe = ProbeHandle::new();
                    worker.dataflow::<u64, _, _>(|scope| {
                        let stream = scope.input_from(&mut input);
                        stream.clone().probe_with(&probe);
                        // Once broken, broken at every later schedule (as an operator whose
                        // state a panic left half-updated): stepped again after the first
                        // panic, it would panic outside any catch and end its thread, and the
                        // other worker would wait for its progress forever.
                        let mut broken = false;
                        stream.sink(Pipeline, "Breaks", move |(input, _frontier)| {
                            assert!(!broken, "an operator's bug, again");
                            input.for_each_stamp(|_, mut data| {
                                broken |= data.any(|batch| batch.contains(&3));
                                assert!(!broken, "an operator's bug");
                            });
                        });
                    });
                    if worker.index() == 0 {
                        input.send(3);
                    }
                    input.advance_to(1);
                    // As the driver's workers do: step until the epoch is done, then hold the
                    // inputs open for the next one; each wait also ends on an abort.
                    while probe.less_than(&1) && !abort.raised() {
                        worker.step_or_park(Some(Duration::from_millis(20)));
                    }
                    while !abort.raised() {
                        worker.step_or_park(Some(Duration::from_millis(20)));
                    }
                })
            })
            .expect("timely starts");
            drop(tx.send(guards.join()));
        });
        let results = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a worker waited forever for the one whose operator panicked");
        let outcomes: Vec<Result<(), String>> = results
            .into_iter()
            .map(|r| r.expect("the panic is caught"))
            .collect();
        assert!(
            matches!(&outcomes[0], Err(e) if e.starts_with("worker 0:") && e.contains("an operator's bug")),
            "{outcomes:?}"
        );
        assert_eq!(outcomes[1], Ok(()));
    }
}
