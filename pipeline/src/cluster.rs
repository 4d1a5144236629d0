//! A timely cluster whose processes find each other within a deadline, and stop together when
//! one of them is gone.
//!
//! timely's own set-up retries a missing peer forever, and a peer that dies takes down only the
//! threads that talk to it while the rest wait for progress that never comes. So cotune connects
//! the processes itself (each connects to the lower indices, sending its index, and accepts the
//! higher ones) with a deadline, turns on TCP keep-alive so that a peer that vanishes silently is
//! noticed within about 25 s, hands the sockets to timely, and watches timely's communication
//! threads: when one fails, the process says which peer is gone and exits with code 1. Every
//! instance finished before that is in the store, so the next run resumes.

use socket2::{SockRef, TcpKeepalive};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};
use timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets;
use timely::communication::allocator::{AllocatorBuilder, ProcessBuilder};
use timely::communication::Hooks;

/// How to run the workers.
#[derive(Clone, Debug)]
pub struct Cluster {
    /// Worker threads per process.
    pub workers: usize,
    /// Processes.
    pub processes: usize,
    /// This process's index.
    pub process: usize,
    /// Addresses of all processes (`host:port`, one per process), when `processes > 1`.
    pub addresses: Vec<String>,
    /// How long to wait for the other processes to connect.
    pub connect_timeout: Duration,
}

/// Why a cluster could not be formed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// A process did not connect in time.
    #[error("cluster process {process} ({address}) did not connect within {} s; start every process of the cluster (or raise --connect-timeout)", waited.as_secs())]
    NoConnection {
        /// Its index.
        process: usize,
        /// Its address.
        address: String,
        /// How long we waited.
        waited: Duration,
    },
    /// A connection said something other than a process index.
    #[error(
        "cluster: a connection to {address} did not identify as a process of this cluster: {what}"
    )]
    Handshake {
        /// This process's address.
        address: String,
        /// What was wrong.
        what: String,
    },
    /// A socket operation failed.
    #[error("cluster: {address}: {source}")]
    Io {
        /// The address involved.
        address: String,
        /// The cause.
        source: std::io::Error,
    },
    /// timely could not start its communication threads.
    #[error("cluster: {0}")]
    Timely(String),
}

/// The allocators of this process's workers and the guard of its communication threads.
pub(crate) type Allocators = (Vec<AllocatorBuilder>, Box<dyn std::any::Any + Send>);

impl Cluster {
    /// The allocators for `timely::execute::execute_from`: threads, or a connected cluster.
    pub(crate) fn allocators(&self) -> Result<Allocators, ClusterError> {
        let config = if self.processes > 1 {
            return self.connect();
        } else if self.workers > 1 {
            timely::CommunicationConfig::Process(self.workers)
        } else {
            timely::CommunicationConfig::Thread
        };
        config.try_build().map_err(ClusterError::Timely)
    }

    fn connect(&self) -> Result<Allocators, ClusterError> {
        let deadline = Instant::now() + self.connect_timeout;
        let sockets = connect_all(
            &self.addresses,
            self.process,
            deadline,
            self.connect_timeout,
        )?;
        let hooks = Hooks::default();
        let local = ProcessBuilder::new_typed_vector(
            self.workers,
            hooks.refill.clone(),
            hooks.spill.clone(),
        );
        let (builders, guard) =
            initialize_networking_from_sockets(local, sockets, self.process, self.workers, hooks)
                .map_err(|source| ClusterError::Io {
                address: self.addresses[self.process].clone(),
                source,
            })?;
        watch_peers(self.addresses.clone());
        Ok((
            builders.into_iter().map(AllocatorBuilder::Tcp).collect(),
            Box::new(guard),
        ))
    }
}

fn io(address: &str) -> impl Fn(std::io::Error) -> ClusterError + '_ {
    move |source| ClusterError::Io {
        address: address.to_owned(),
        source,
    }
}

/// A socket to every other process (`None` at `me`), or the first process that did not connect.
fn connect_all(
    addresses: &[String],
    me: usize,
    deadline: Instant,
    waited: Duration,
) -> Result<Vec<Option<TcpStream>>, ClusterError> {
    let mine = &addresses[me];
    let listener = TcpListener::bind(mine).map_err(io(mine))?;
    listener.set_nonblocking(true).map_err(io(mine))?;
    let missing = |process: usize| ClusterError::NoConnection {
        process,
        address: addresses[process].clone(),
        waited,
    };
    let mut sockets: Vec<Option<TcpStream>> = (0..addresses.len()).map(|_| None).collect();
    for (peer, address) in addresses.iter().enumerate().take(me) {
        let target = address
            .to_socket_addrs()
            .map_err(io(address))?
            .next()
            .ok_or_else(|| missing(peer))?;
        let mut stream = loop {
            match TcpStream::connect_timeout(&target, Duration::from_secs(1)) {
                Ok(s) => break s,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100))
                }
                Err(_) => return Err(missing(peer)),
            }
        };
        stream
            .write_all(&(me as u64).to_be_bytes())
            .map_err(io(address))?;
        sockets[peer] = Some(stream);
    }
    let mut pending: BTreeSet<usize> = (me + 1..addresses.len()).collect();
    while let Some(&first) = pending.first() {
        match listener.accept() {
            Ok((mut stream, _)) => {
                stream.set_nonblocking(false).map_err(io(mine))?;
                let left = deadline.saturating_duration_since(Instant::now());
                stream
                    .set_read_timeout(Some(left.max(Duration::from_millis(100))))
                    .map_err(io(mine))?;
                let mut index = [0u8; 8];
                stream
                    .read_exact(&mut index)
                    .map_err(|e| ClusterError::Handshake {
                        address: mine.clone(),
                        what: e.to_string(),
                    })?;
                let peer = u64::from_be_bytes(index) as usize;
                if !pending.remove(&peer) {
                    return Err(ClusterError::Handshake {
                        address: mine.clone(),
                        what: format!("index {peer} is not one still expected ({pending:?})"),
                    });
                }
                stream.set_read_timeout(None).map_err(io(mine))?;
                sockets[peer] = Some(stream);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(missing(first));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(io(mine)(e)),
        }
    }
    // A peer that vanishes without closing its socket (power loss, a cut link) is noticed by
    // keep-alive probes: 10 s idle, then 3 probes 5 s apart.
    let keepalive = TcpKeepalive::new()
        .with_time(Duration::from_secs(10))
        .with_interval(Duration::from_secs(5))
        .with_retries(3);
    for (peer, s) in sockets.iter().enumerate() {
        if let Some(s) = s {
            let sock = SockRef::from(s);
            sock.set_tcp_nodelay(true)
                .and_then(|()| sock.set_tcp_keepalive(&keepalive))
                .map_err(io(&addresses[peer]))?;
        }
    }
    Ok(sockets)
}

/// When a communication thread of timely fails (its peer closed the connection or stopped
/// answering), says which process is gone and exits: the others' workers would otherwise wait
/// forever for progress from it.
fn watch_peers(addresses: Vec<String>) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let peer = thread
            .name()
            .and_then(|n| {
                n.strip_prefix("timely:recv-")
                    .or_else(|| n.strip_prefix("timely:send-"))
            })
            .and_then(|i| i.parse::<usize>().ok());
        if let Some(peer) = peer {
            let why = info
                .payload()
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| info.payload().downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let address = addresses.get(peer).map_or("?", String::as_str);
            tell!(
                "error: cluster process {peer} ({address}) is gone ({why}); stopping. What the \
                 cluster finished is in the store: start it again to resume."
            );
            // Exit code 1, as for failed trials: the run did not complete.
            std::process::exit(1);
        }
        previous(info);
    }));
}
