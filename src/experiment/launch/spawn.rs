//! The one launcher of node processes on this machine: `bench --procs`, `agree --procs`,
//! `stress agree --procs`, `bootstrap` and the sub-runs of `reproduce` all start, watch, stop
//! and reap their children here.
//!
//! - A [`Launch`] is the spec: the executable, the environment every child gets (a key is
//!   passed this way, never on a command line), whether the children read commands on stdin,
//!   how a child reports the address it bound ([`Report`]) and how long it may take to.
//! - [`Procs`] are the children of one run, one per slot (rank). Every child's stdout comes
//!   back line by line through one channel ([`Procs::recv`]), tagged with its slot; lines of a
//!   slot's earlier process (a rank restarted by `stress`) are dropped. Its stderr is passed
//!   through to this process's stderr line by line, and its last line is kept: a child that
//!   exits when it should not is reported in one line with its slot, its exit status and that
//!   last line ([`Procs::exit_error`]).
//! - Every child still running when the `Procs` is dropped (the run ended, failed, or
//!   panicked) is SIGKILLed and reaped, and its stderr drained before the drop returns, so
//!   that nothing a child printed comes after the run's own last line.
//! - A launched node (`agree --join`: a TCP stream, no process of ours) takes a slot the same
//!   way ([`Procs::attach`]); only what concerns a process (exit status, kill) does not apply.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How a child tells the launcher the address of the socket it bound (and keeps: no port is
/// chosen here and bound there, where another program could take it in between).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Report {
    /// One stdout line `PREFIX ADDR` (`boot-node`: `listening`),
    /// collected by [`Procs::addresses`].
    Pipe(&'static str),
    /// Over the control plane ([`crate::runtime::control`], sealed with the run's key:
    /// `node`; `agree-node` joins its parent's rendezvous, `crate::group::Rendezvous`); the
    /// launcher watches that the children live ([`Procs::check_exited`]).
    Control,
    /// No address: a sub-run that runs to its end ([`Launch::output`]).
    Nothing,
}

/// How to start the processes of one run.
#[derive(Clone, Debug)]
pub struct Launch {
    pub exe: PathBuf,
    /// Set in every child's environment.
    pub env: Vec<(String, String)>,
    /// The children read commands on stdin ([`Procs::send`]); closing it stops them.
    pub stdin: bool,
    pub report: Report,
    /// How long a child may take to report its address.
    pub timeout: Duration,
    /// Pass each child's stderr through to this process's (else only its last line is kept,
    /// for the error).
    pub pass_stderr: bool,
    /// What a child is called in errors (`node`, `node process`).
    pub what: &'static str,
}

impl Launch {
    /// Node processes of `exe` reporting as `report` within `timeout`, stderr passed through,
    /// no stdin, no extra environment.
    pub fn new(exe: &Path, report: Report, timeout: Duration) -> Launch {
        Launch {
            exe: exe.to_path_buf(),
            env: Vec::new(),
            stdin: false,
            report,
            timeout,
            pass_stderr: true,
            what: "node",
        }
    }

    /// `count` empty slots; [`Procs::spawn`] fills them.
    pub fn slots(&self, count: u32) -> Procs {
        let (tx, rx) = mpsc::channel();
        Procs {
            launch: self.clone(),
            slots: (0..count).map(|_| None).collect(),
            tx,
            rx,
            pending: std::collections::VecDeque::new(),
            next_tag: 0,
        }
    }

    /// One child per entry of `args`, slot `i` started with `args[i]`.
    pub fn start(&self, args: Vec<Vec<String>>) -> Result<Procs, String> {
        let mut p = self.slots(args.len() as u32);
        for (slot, a) in args.iter().enumerate() {
            p.spawn(slot as u32, a)?;
        }
        Ok(p)
    }

    /// Runs one child with `args` to its end and returns its stdout; a child that fails is one
    /// line: `` `ftcoll SHOWN` failed (STATUS): LAST STDERR LINE `` (`shown`: the arguments
    /// as the user would type them). No timeout (a sub-run takes as long as it takes).
    pub fn output(&self, args: &[String], shown: &str) -> Result<Vec<u8>, String> {
        let p = self.slots(1);
        let mut child = p
            .command(args)
            .spawn()
            .map_err(|e| format!("cannot run `ftcoll {shown}`: {e}"))?;
        let tail = Tail::follow(child.stderr.take(), self.pass_stderr);
        let mut out = Vec::new();
        if let Some(mut o) = child.stdout.take() {
            let _ = o.read_to_end(&mut out);
        }
        let status = child.wait().map_err(|e| format!("cannot run `ftcoll {shown}`: {e}"))?;
        let last = tail.last(Duration::from_secs(1));
        if !status.success() {
            return Err(format!("`ftcoll {shown}` failed ({status}){}", said(last)));
        }
        Ok(out)
    }
}

/// `: LINE` when the child said something on stderr.
fn said(last: Option<String>) -> String {
    last.map(|l| format!(": {}", l.trim())).unwrap_or_default()
}

/// A child's stderr, read by a thread of its own: passed through (or not) line by line, the
/// last line kept.
struct Tail {
    state: Mutex<(Option<String>, bool)>,
    done: Condvar,
}

impl Tail {
    fn follow(stderr: Option<impl Read + Send + 'static>, pass: bool) -> Arc<Tail> {
        let tail = Arc::new(Tail {
            state: Mutex::new((None, stderr.is_none())),
            done: Condvar::new(),
        });
        if let Some(err) = stderr {
            let t = Arc::clone(&tail);
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    if pass {
                        // Not `eprintln!`: a closed stderr must not end the thread early.
                        let _ = writeln!(std::io::stderr().lock(), "{line}");
                    }
                    if !line.trim().is_empty()
                        && let Ok(mut s) = t.state.lock()
                    {
                        s.0 = Some(line);
                    }
                }
                if let Ok(mut s) = t.state.lock() {
                    s.1 = true;
                }
                t.done.notify_all();
            });
        }
        tail
    }

    /// The last line, once the stream ended (waiting at most `within` for its end).
    fn last(&self, within: Duration) -> Option<String> {
        let Ok(s) = self.state.lock() else { return None };
        let s = self.done.wait_timeout_while(s, within, |s| !s.1).map(|(s, _)| s).ok()?;
        s.0.clone()
    }
}

/// One slot's occupant: a process of ours, or a launched node's stream.
struct Member {
    child: Option<Child>,
    input: Option<Box<dyn Write + Send>>,
    tag: u64,
    stderr: Option<Arc<Tail>>,
    status: Option<ExitStatus>,
}

impl Member {
    /// SIGKILLs the process (if still running), reaps it and drains its stderr.
    fn reap(&mut self) {
        self.input = None;
        if let Some(c) = self.child.as_mut() {
            if self.status.is_none() {
                let _ = c.kill();
                self.status = c.wait().ok();
            }
            if let Some(t) = &self.stderr {
                let _ = t.last(Duration::from_secs(1));
            }
        }
    }
}

/// The children of one run; every one still running is SIGKILLed and reaped on drop.
pub struct Procs {
    launch: Launch,
    slots: Vec<Option<Member>>,
    tx: mpsc::Sender<(u64, Option<String>)>,
    rx: mpsc::Receiver<(u64, Option<String>)>,
    /// Lines received while waiting for something else, delivered first by [`Procs::recv`].
    pending: std::collections::VecDeque<(usize, Option<String>)>,
    next_tag: u64,
}

impl Drop for Procs {
    fn drop(&mut self) {
        for m in self.slots.iter_mut().flatten() {
            m.reap();
        }
    }
}

impl Procs {
    fn command(&self, args: &[String]) -> Command {
        let l = &self.launch;
        let mut cmd = Command::new(&l.exe);
        cmd.args(args)
            .envs(l.env.iter().map(|(k, v)| (k, v)))
            .stdin(if l.stdin { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// The number of slots.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether there are no slots.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Starts a child with `args` in `slot`; a process there before is killed and reaped.
    pub fn spawn(&mut self, slot: u32, args: &[String]) -> Result<(), String> {
        let mut child = self
            .command(args)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.launch.exe.display()))?;
        let stderr = Tail::follow(child.stderr.take(), self.launch.pass_stderr);
        let out = child.stdout.take().ok_or("cannot open a node process's stdout")?;
        let input = child.stdin.take().map(|i| Box::new(i) as Box<dyn Write + Send>);
        self.occupy(slot, out, input, Some(child), Some(stderr));
        Ok(())
    }

    /// Puts in `slot` a launched node whose lines come from `lines` and whose commands go to
    /// `input` (no process of ours).
    pub fn attach(&mut self, slot: u32, lines: impl Read + Send + 'static, input: Box<dyn Write + Send>) {
        self.occupy(slot, lines, Some(input), None, None);
    }

    fn occupy(
        &mut self,
        slot: u32,
        lines: impl Read + Send + 'static,
        input: Option<Box<dyn Write + Send>>,
        child: Option<Child>,
        stderr: Option<Arc<Tail>>,
    ) {
        let tag = self.next_tag;
        self.next_tag += 1;
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(lines).lines().map_while(Result::ok) {
                if tx.send((tag, Some(l))).is_err() {
                    return;
                }
            }
            let _ = tx.send((tag, None));
        });
        let new = Member {
            child,
            input,
            tag,
            stderr,
            status: None,
        };
        if let Some(mut old) = self.slots[slot as usize].replace(new) {
            old.reap();
        }
        self.pending.retain(|&(s, _)| s != slot as usize);
    }

    /// The next stdout line of any slot's current occupant (`None`: its stdout ended), waiting
    /// at most `within`; `None` when nothing came.
    pub fn recv(&mut self, within: Duration) -> Option<(usize, Option<String>)> {
        if let Some(x) = self.pending.pop_front() {
            return Some(x);
        }
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok((tag, line)) => {
                    let slot = self.slots.iter().position(|m| m.as_ref().is_some_and(|m| m.tag == tag));
                    if let Some(s) = slot {
                        return Some((s, line));
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// The addresses the children in `slots` report ([`Report::Pipe`]), in the order of
    /// `slots`, within the launch's timeout. A child that exits first, or one that does not
    /// report in time, fails the launch in one line; other lines wait for [`Procs::recv`].
    pub fn addresses(&mut self, slots: &[u32]) -> Result<Vec<SocketAddr>, String> {
        let Report::Pipe(prefix) = self.launch.report else {
            return Err("internal: these children report no address on stdout".into());
        };
        let within = self.launch.timeout;
        let deadline = Instant::now() + within;
        let mut at: Vec<Option<SocketAddr>> = vec![None; slots.len()];
        let mut kept = Vec::new();
        let res = loop {
            let Some(i) = at.iter().position(Option::is_none) else {
                break Ok(());
            };
            let left = deadline.saturating_duration_since(Instant::now());
            let Some((slot, line)) = self.recv(left) else {
                let k = at.iter().flatten().count();
                break Err(format!(
                    "only {k} of {} {}s reported their address within {within:?} ({} {} did not)",
                    slots.len(),
                    self.launch.what,
                    self.launch.what,
                    slots[i]
                ));
            };
            let Some(j) = slots.iter().position(|&s| s as usize == slot) else {
                kept.push((slot, line));
                continue;
            };
            match line {
                None => break Err(self.exit_error(slot, "before it reported its address")),
                Some(l) => match l.trim().strip_prefix(prefix).map(|a| a.trim().parse::<SocketAddr>()) {
                    Some(Ok(a)) if at[j].is_none() => at[j] = Some(a),
                    Some(_) => {
                        break Err(format!(
                            "{} {slot} reported '{}', not {prefix} IP:port",
                            self.launch.what,
                            l.escape_debug()
                        ));
                    }
                    None => kept.push((slot, Some(l))),
                },
            }
        };
        self.pending.extend(kept);
        res.map(|()| at.into_iter().flatten().collect())
    }

    /// One line saying why the process of `slot` is gone: `NODE SLOT exited WHEN (STATUS):
    /// LAST STDERR LINE`. Reaps it (SIGKILL after a second, should it still run with its
    /// stdout closed).
    pub fn exit_error(&mut self, slot: usize, when: &str) -> String {
        let what = self.launch.what;
        let Some(m) = self.slots[slot].as_mut() else {
            return format!("{what} {slot} exited {when}");
        };
        let Some(c) = m.child.as_mut() else {
            return format!("{what} {slot} closed its stream {when}");
        };
        if m.status.is_none() {
            let deadline = Instant::now() + Duration::from_secs(1);
            while m.status.is_none() && Instant::now() < deadline {
                m.status = c.try_wait().ok().flatten();
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        m.reap();
        let status = m
            .status
            .map(|s| s.to_string())
            .unwrap_or_else(|| "status unknown".into());
        // The process is gone: its stderr ends as soon as its reader has read it all.
        let last = m.stderr.as_ref().and_then(|t| t.last(Duration::from_secs(5)));
        format!("{what} {slot} exited {when} ({status}){}", said(last))
    }

    /// The first process that has exited, unless `may_exit(slot)`: an error as
    /// [`Procs::exit_error`] says it.
    pub fn check_exited(&mut self, may_exit: &dyn Fn(usize) -> bool, when: &str) -> Result<(), String> {
        for slot in 0..self.slots.len() {
            if may_exit(slot) || !self.exited(slot) {
                continue;
            }
            return Err(self.exit_error(slot, when));
        }
        Ok(())
    }

    /// Whether the process in `slot` has exited (reaping it); a launched node never has.
    pub fn exited(&mut self, slot: usize) -> bool {
        let Some(m) = self.slots[slot].as_mut() else {
            return false;
        };
        if m.status.is_none()
            && let Some(c) = m.child.as_mut()
        {
            m.status = c.try_wait().ok().flatten();
        }
        m.status.is_some()
    }

    /// Whether `slot` holds a process of ours (not a launched node's stream).
    pub fn is_process(&self, slot: usize) -> bool {
        self.slots[slot].as_ref().is_some_and(|m| m.child.is_some())
    }

    /// SIGKILLs the process in `slot` (reaped later).
    pub fn kill(&mut self, slot: usize) {
        if let Some(c) = self.slots[slot].as_mut().and_then(|m| m.child.as_mut()) {
            let _ = c.kill();
        }
    }

    /// SIGKILLs the process in `slot`, reaps it and drains its stderr.
    pub fn reap(&mut self, slot: usize) {
        if let Some(m) = self.slots[slot].as_mut() {
            m.reap();
        }
    }

    /// Waits until every process has exited, at most `within`, calling `poke` between looks
    /// (to repeat a stop that may have been lost); then kills and reaps the rest.
    pub fn stop(&mut self, within: Duration, poke: &mut dyn FnMut()) {
        let deadline = Instant::now() + within;
        while (0..self.slots.len()).any(|s| self.is_process(s) && !self.exited(s)) && Instant::now() < deadline {
            poke();
            std::thread::sleep(Duration::from_millis(1));
        }
        for m in self.slots.iter_mut().flatten() {
            m.reap();
        }
    }

    /// The exit status of the process in `slot`, waiting for it.
    pub fn wait(&mut self, slot: usize) -> Result<Option<ExitStatus>, String> {
        let Some(m) = self.slots[slot].as_mut() else {
            return Ok(None);
        };
        if m.status.is_none()
            && let Some(c) = m.child.as_mut()
        {
            m.status = Some(c.wait().map_err(|e| e.to_string())?);
        }
        if let Some(t) = &m.stderr {
            let _ = t.last(Duration::from_secs(1));
        }
        Ok(m.status)
    }

    /// Writes `text` and a newline to the stdin (or stream) of `slot`.
    pub fn send(&mut self, slot: usize, text: &str) {
        if let Some(input) = self.slots[slot].as_mut().and_then(|m| m.input.as_mut()) {
            let _ = input.write_all(text.as_bytes());
            let _ = input.write_all(b"\n");
            let _ = input.flush();
        }
    }

    /// Closes every stdin (or stream): the children stop.
    pub fn close_inputs(&mut self) {
        for m in self.slots.iter_mut().flatten() {
            m.input = None;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
