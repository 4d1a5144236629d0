//! A timely cluster whose processes find each other within a deadline, and stop together when
//! one of them is gone.
//!
//! timely's own set-up retries a missing peer forever, and a peer that dies takes down only the
//! threads that talk to it while the rest wait for progress that never comes. So cotune connects
//! the processes itself (each connects to the lower indices, sending its index and what the
//! processes must agree on, and accepts the higher ones; see [`connect_all`]) with a deadline, turns on TCP keep-alive so that a peer that vanishes silently is
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
    /// What every process of the cluster must agree on, one `name value` per line (the
    /// experiment and its plan, the process and worker counts, the hosts, the store's id and
    /// the results folder): exchanged when the processes connect, and a process that differs is
    /// refused, naming the line. What follows [`NOTE`] on a line is shown, not compared.
    pub identity: String,
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
    /// A process started differently (another experiment, store, worker count, …) or of
    /// another cluster: refused.
    #[error("cluster: refused to form with process {process} ({address}): {why}")]
    Refused {
        /// Its index.
        process: usize,
        /// Its address.
        address: String,
        /// The difference.
        why: String,
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
            &self.identity,
            deadline,
            self.connect_timeout,
        )?;
        // Before timely's communication threads start: one whose peer is already gone fails
        // at once, and must find the hook that stops this process.
        watch_peers(self.addresses.clone());
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

/// The first bytes of every handshake: a connection that does not start with them is not a
/// cotune process of this version (a port probe, another program) and is ignored.
const MAGIC: &[u8; 8] = b"cotune\x00\x02";

/// The longest identity or refusal a handshake reads.
const MAX_TEXT: u64 = 64 * 1024;

/// Writes `MAGIC`, then `index` and `text` (length-prefixed).
fn send_hello(stream: &mut TcpStream, index: u64, text: &str) -> std::io::Result<()> {
    let mut msg = MAGIC.to_vec();
    msg.extend(index.to_be_bytes());
    msg.extend((text.len() as u64).to_be_bytes());
    msg.extend(text.as_bytes());
    stream.write_all(&msg)
}

/// Reads what [`send_hello`] wrote: `None` where the bytes are not a cotune handshake.
fn read_hello(stream: &mut TcpStream) -> std::io::Result<Option<(u64, String)>> {
    let mut magic = [0u8; 8];
    stream.read_exact(&mut magic)?;
    if &magic != MAGIC {
        return Ok(None);
    }
    let mut word = [0u8; 8];
    stream.read_exact(&mut word)?;
    let index = u64::from_be_bytes(word);
    stream.read_exact(&mut word)?;
    let len = u64::from_be_bytes(word);
    if len > MAX_TEXT {
        return Ok(None);
    }
    let mut text = vec![0u8; len as usize];
    stream.read_exact(&mut text)?;
    Ok(String::from_utf8(text).ok().map(|t| (index, t)))
}

/// Where an identity line's note starts: what follows is shown in a refusal, never compared
/// (the store's path beside its id, which may be mounted elsewhere on another host).
pub const NOTE: &str = "  # ";

/// The first line where two identities differ: `ours` (process `me`'s) against `theirs`
/// (process `peer`'s), each line compared up to its [`NOTE`].
fn difference(ours: &str, theirs: &str, me: usize, peer: usize) -> Option<String> {
    fn compared(line: Option<&str>) -> Option<&str> {
        line.map(|l| l.split(NOTE).next().unwrap_or(l))
    }
    let (mut a, mut b) = (ours.lines(), theirs.lines());
    loop {
        match (a.next(), b.next()) {
            (None, None) => return None,
            (x, y) if compared(x) == compared(y) => continue,
            (x, y) => {
                return Some(format!(
                    "`{}` on process {me}, `{}` on process {peer}",
                    x.unwrap_or("-"),
                    y.unwrap_or("-")
                ))
            }
        }
    }
}

/// The reply to a hello: accepted (empty text) or refused, and why.
const ACCEPTED: u64 = u64::MAX;

/// A socket to every other process (`None` at `me`), or the first process that did not connect.
///
/// Each process connects to the lower indices and sends a hello (its index and `identity`),
/// which the other answers (accepted, or refused with the reason); it accepts the higher
/// indices. A connection that is not a cotune hello is closed and ignored; a hello of another
/// cluster, of a process already connected, or with another identity is refused, and both
/// processes stop naming the difference.
fn connect_all(
    addresses: &[String],
    me: usize,
    identity: &str,
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
    let left = || {
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(100))
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
        stream.set_read_timeout(Some(left())).map_err(io(address))?;
        send_hello(&mut stream, me as u64, identity).map_err(io(address))?;
        match read_hello(&mut stream) {
            Ok(Some((ACCEPTED, _))) => {}
            Ok(Some((_, why))) => {
                return Err(ClusterError::Refused {
                    process: peer,
                    address: address.clone(),
                    why,
                })
            }
            Ok(None) => {
                return Err(ClusterError::Handshake {
                    address: address.clone(),
                    what: format!(
                        "what answered there is not cotune process {peer} (another program on \
                         that port?)"
                    ),
                })
            }
            Err(e) => {
                return Err(ClusterError::Handshake {
                    address: address.clone(),
                    what: format!(
                        "no cotune process {peer} answered there ({e}: it stopped, refused \
                         another process first, or another program holds that port)"
                    ),
                })
            }
        }
        stream.set_read_timeout(None).map_err(io(address))?;
        sockets[peer] = Some(stream);
    }
    let mut pending: BTreeSet<usize> = (me + 1..addresses.len()).collect();
    while let Some(&first) = pending.first() {
        match listener.accept() {
            Ok((mut stream, from)) => {
                stream.set_nonblocking(false).map_err(io(mine))?;
                // A hello comes at once; a connection that sends nothing is not a peer.
                stream
                    .set_read_timeout(Some(left().min(Duration::from_secs(5))))
                    .map_err(io(mine))?;
                let Ok(Some((peer, theirs))) = read_hello(&mut stream) else {
                    tell!("cluster: ignored a connection from {from} that is not a cotune process");
                    continue;
                };
                let peer = peer as usize;
                let refusal = if !pending.contains(&peer) {
                    Some(format!(
                        "process {me} ({mine}) expects processes {pending:?}, not {peer}: \
                         two processes started with one --process, or one of another cluster"
                    ))
                } else {
                    difference(identity, &theirs, me, peer).map(|d| {
                        format!(
                            "process {peer} was started differently from process {me}: {d}; \
                             every process of a cluster runs the same experiment file, on \
                             machines alike (the plan's keys name the CPU, its cores and ISA), \
                             with the same --processes, --workers, hostfile and --out, and one \
                             store (a `store` that differs is another folder: on several hosts, \
                             the store must be on a file system they share)"
                        )
                    })
                };
                let reply = refusal.as_deref().unwrap_or("");
                let code = if refusal.is_some() {
                    me as u64
                } else {
                    ACCEPTED
                };
                send_hello(&mut stream, code, reply).map_err(io(mine))?;
                if let Some(why) = refusal {
                    return Err(ClusterError::Refused {
                        process: peer,
                        address: from.to_string(),
                        why,
                    });
                }
                pending.remove(&peer);
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
    // keep-alive probes: 10 s idle, then 3 probes 5 s apart. Keep-alive waits while sent data
    // is unacknowledged, so a send that no one acknowledges for 25 s fails too (Linux's
    // TCP_USER_TIMEOUT; without it a cut link went unnoticed by the sender for ~15 minutes of
    // retransmissions).
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
            #[cfg(any(target_os = "linux", target_os = "android"))]
            sock.set_tcp_user_timeout(Some(Duration::from_secs(25)))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_compared_line_by_line_up_to_their_notes() {
        let a = "experiment e\nworkers 1\nstore 01ab  # /mnt/a/store";
        // The same store mounted elsewhere: the same identity.
        assert_eq!(
            difference(a, "experiment e\nworkers 1\nstore 01ab  # /b", 0, 1),
            None
        );
        assert_eq!(
            difference(
                a,
                "experiment e\nworkers 1\nstore 99ff  # /mnt/a/store",
                0,
                1
            )
            .unwrap(),
            "`store 01ab  # /mnt/a/store` on process 0, `store 99ff  # /mnt/a/store` on process 1"
        );
        assert_eq!(
            difference(a, "experiment e\nworkers 2\nstore 01ab", 1, 0).unwrap(),
            "`workers 1` on process 1, `workers 2` on process 0"
        );
        assert_eq!(
            difference(a, "experiment e\nworkers 1", 0, 1).unwrap(),
            "`store 01ab  # /mnt/a/store` on process 0, `-` on process 1"
        );
    }
}
