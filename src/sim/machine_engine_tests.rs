//! The machine engine's LogGP timing in closed form, timers, dead receivers and the event
//! cap, with a toy [`Machine`] and a harness that records every receive.

use crate::model::{LogGP, Time};
use crate::protocol::{Event, Machine, Rank};
use crate::sim::machine_engine::{Harness, MachineEngine};

/// Sends `burst` messages to rank 1 when handed an input (or when its timer at `wake` fires).
struct Sender {
    burst: u32,
    wake: Option<Time>,
    woken_at: Option<Time>,
}

impl Machine for Sender {
    type Msg = u32;
    type Input = u32;
    type Output = ();
    type Error = ();

    fn handle(&mut self, now: Time, ev: Event<u32, u32>) -> Result<(), ()> {
        match ev {
            Event::Input(k) => self.burst = k,
            Event::Timer => {
                self.wake = None;
                self.woken_at = Some(now);
                self.burst = 1;
            }
            Event::Message { .. } | Event::Suspect(_) => {}
        }
        Ok(())
    }

    fn poll_transmit(&mut self, _now: Time) -> Option<(Rank, u32)> {
        (self.burst > 0).then(|| {
            self.burst -= 1;
            (1, self.burst)
        })
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.wake
    }

    fn poll_output(&mut self) -> Option<()> {
        None
    }
}

/// Hands rank 0 its input at the start and records (time, from, tag) of every receive.
#[derive(Default)]
struct Record {
    input: u32,
    received: Vec<(Time, Rank, Time)>,
    settled: u32,
}

impl Harness<Sender> for Record {
    type Tag = Time;

    fn on_send(&mut self, _r: Rank, _to: Rank, _msg: &u32, now: Time) -> Time {
        now
    }

    fn on_receive(
        &mut self,
        _eng: &mut MachineEngine<Sender, Time>,
        _to: Rank,
        from: Rank,
        _msg: &u32,
        sent: Time,
        now: Time,
    ) -> bool {
        self.received.push((now, from, sent));
        true
    }

    fn settle(&mut self, eng: &mut MachineEngine<Sender, Time>, r: Rank, now: Time) {
        self.settled += 1;
        if r == 0 && now == 0 && self.input > 0 {
            _ = eng.node_mut(0).handle(0, Event::Input(self.input));
            self.input = 0;
        }
    }

    fn on_die(&mut self, eng: &mut MachineEngine<Sender, Time>, r: Rank, now: Time) {
        eng.kill(r, now);
    }
}

fn engine(gp: LogGP, wake: Option<Time>, max_events: u64) -> MachineEngine<Sender, Time> {
    // Only rank 0 has a timer.
    let nodes = (0..2)
        .map(|r| Sender {
            burst: 0,
            wake: wake.filter(|_| r == 0),
            woken_at: None,
        })
        .collect();
    MachineEngine::new(nodes, gp, 4 * gp.hop(), 1, max_events)
}

#[test]
fn a_burst_is_sent_a_slot_apart_and_received_a_receive_slot_apart() {
    // o_s = 2, L = 3, o_r = 1, g = 6: sends start at 0, 6, 12 (the gap), each message arrives
    // o_s + L = 5 later and its receive ends o_r after that.
    let gp = LogGP::new(3, 2, 1, 6, 0).unwrap();
    let mut eng = engine(gp, None, 1000);
    let mut h = Record {
        input: 3,
        ..Record::default()
    };
    eng.run(&mut h);
    assert!(!eng.aborted());
    let want: Vec<(Time, Rank, Time)> = (0..3).map(|i| (6 * i + 6, 0, 6 * i)).collect();
    assert_eq!(h.received, want);
    assert_eq!(eng.end_time(), 18);
}

#[test]
fn a_machine_timer_fires_at_its_time() {
    let gp = LogGP::new(3, 2, 1, 0, 0).unwrap();
    let mut eng = engine(gp, Some(10), 1000);
    let mut h = Record::default();
    eng.run(&mut h);
    assert!(!eng.aborted());
    assert_eq!(eng.node(0).woken_at, Some(10));
    // Rank 0 wakes at 10 and sends; the receive ends o_s + L + o_r later.
    assert_eq!(h.received, vec![(16, 0, 10)]);
    assert_eq!(eng.node(1).woken_at, None);
}

#[test]
fn a_message_to_a_dead_process_vanishes_after_its_sender_paid_for_it() {
    let gp = LogGP::new(3, 2, 1, 4, 0).unwrap();
    let mut eng = engine(gp, None, 1000);
    eng.die_at(0, 1);
    let mut h = Record {
        input: 2,
        ..Record::default()
    };
    eng.run(&mut h);
    assert!(!eng.aborted());
    assert!(h.received.is_empty());
    assert_eq!(eng.death(1), 0);
    assert!(eng.any_dead() && eng.alive(0) && !eng.alive(1));
}

#[test]
fn a_run_past_the_event_cap_is_stopped_and_marked_aborted() {
    let gp = LogGP::new(3, 2, 1, 0, 0).unwrap();
    let mut eng = engine(gp, None, 4);
    let mut h = Record {
        input: 50,
        ..Record::default()
    };
    eng.run(&mut h);
    assert!(eng.aborted());
    assert_eq!(eng.events(), 5);
    assert!(h.received.len() < 50);
}

/// Rank 0 sends rank 1 one message at the start. Rank 1, on it, queues a reply and arms a
/// timer for the same instant, whose handling puts an urgent message before the reply.
struct Urgent {
    start: bool,
    /// Rank 0 sent its message, rank 1 answered one (each does it once).
    start_done: bool,
    queue: std::collections::VecDeque<u32>,
    timer: Option<Time>,
}

impl Machine for Urgent {
    type Msg = u32;
    type Input = ();
    type Output = ();
    type Error = ();

    fn handle(&mut self, now: Time, ev: Event<u32, ()>) -> Result<(), ()> {
        match ev {
            Event::Message { .. } if !self.start_done => {
                self.start_done = true;
                self.queue.push_back(1);
                self.timer = Some(now);
            }
            Event::Timer => {
                self.timer = None;
                self.queue.push_front(2);
            }
            Event::Message { .. } | Event::Input(()) | Event::Suspect(_) => {}
        }
        Ok(())
    }

    fn poll_transmit(&mut self, _now: Time) -> Option<(Rank, u32)> {
        if std::mem::take(&mut self.start) {
            self.start_done = true;
            return Some((1, 0));
        }
        self.queue.pop_front().map(|m| (0, m))
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.timer
    }

    fn poll_output(&mut self) -> Option<()> {
        None
    }
}

/// Records (time, message) of every receive at rank 0.
#[derive(Default)]
struct AtZero(Vec<(Time, u32)>);

impl Harness<Urgent> for AtZero {
    type Tag = ();
    fn on_send(&mut self, _r: Rank, _to: Rank, _msg: &u32, _now: Time) {}
    fn on_receive(
        &mut self,
        _: &mut MachineEngine<Urgent, ()>,
        to: Rank,
        _: Rank,
        msg: &u32,
        _: (),
        now: Time,
    ) -> bool {
        if to == 0 {
            self.0.push((now, *msg));
        }
        true
    }
    fn settle(&mut self, _: &mut MachineEngine<Urgent, ()>, _r: Rank, _now: Time) {}
    fn on_die(&mut self, _: &mut MachineEngine<Urgent, ()>, _r: Rank, _now: Time) {}
}

#[test]
fn a_sender_acts_on_a_timer_of_the_same_instant_before_it_sends() {
    // o_s = 2, L = 3, o_r = 1, g = 0: rank 1 receives at 6 and its timer is due at 6; in
    // the instant order the timer's message goes first (sent at 6, received at 12), the reply
    // a send slot later.
    let gp = LogGP::new(3, 2, 1, 0, 0).unwrap();
    for order in [true, false] {
        let nodes = (0..2)
            .map(|r| Urgent {
                start: r == 0,
                start_done: false,
                queue: Default::default(),
                timer: None,
            })
            .collect();
        let mut eng = MachineEngine::new(nodes, gp, 4 * gp.hop(), 1, 1000);
        eng.instant_order(order);
        let mut h = AtZero::default();
        eng.run(&mut h);
        assert!(!eng.aborted());
        if order {
            assert_eq!(h.0, vec![(12, 2), (14, 1)]);
        } else {
            // Asked right after the receive: the reply goes first.
            assert_eq!(h.0, vec![(12, 1), (14, 2)]);
        }
    }
}
