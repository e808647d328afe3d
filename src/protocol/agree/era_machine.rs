//! [`Era`] under the sans-IO contract ([`crate::protocol::machine`]): the input is a value to
//! agree on (procedure Agreement, [`Era::agree`]), a message goes to [`Era::on_message`], a
//! suspicion to [`Era::on_dead`] (ERA Part 4), and the output is each returned agreement's
//! [`Outcome`] ([`Era::poll_outcome`]). ERA keeps no timer: its failure detector is the
//! driver's ([`crate::protocol::detector`]), which probes the processes ERA doubts
//! ([`Era::poll_doubt`]).

use super::era::{AgreeError, Era, EraMsg, Outcome};
use super::value::Value;
use crate::protocol::machine::{Event, Machine};
use crate::protocol::{Rank, Time};

impl<V: Value> Machine for Era<V> {
    type Msg = EraMsg<V>;
    type Input = V;
    type Output = Outcome<V>;
    type Error = AgreeError;
    const TIMED: bool = false;

    #[inline]
    fn handle(&mut self, _now: Time, ev: Event<EraMsg<V>, V>) -> Result<(), AgreeError> {
        match ev {
            Event::Message { from, msg } => self.on_message(from, msg),
            Event::Suspect(q) => self.on_dead(q),
            Event::Timer => {}
            Event::Input(v) => {
                self.agree(v)?;
            }
        }
        Ok(())
    }

    #[inline]
    fn poll_transmit(&mut self, _now: Time) -> Option<(Rank, EraMsg<V>)> {
        self.poll_send()
    }

    #[inline]
    fn poll_output(&mut self) -> Option<Outcome<V>> {
        self.poll_outcome()
    }

    #[inline]
    fn poll_doubt(&mut self) -> Option<Rank> {
        Era::poll_doubt(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::agree::{And64, EraConfig};

    /// The contract and the inherent API are the same machine: a failure-free and a
    /// one-death agreement over four processes, driven only through [`Machine`].
    #[test]
    fn era_agrees_through_the_contract() {
        let n = 4;
        let mut ms: Vec<Era<And64>> = (0..n).map(|r| Era::new(r, n, EraConfig::default()).unwrap()).collect();
        let run = |ms: &mut Vec<Era<And64>>, dead: Option<Rank>| -> Vec<Option<Outcome<And64>>> {
            for (r, m) in ms.iter_mut().enumerate() {
                if Some(r as Rank) != dead {
                    m.handle(0, Event::Input(And64(!(1 << r)))).unwrap();
                    if let Some(d) = dead {
                        m.handle(0, Event::Suspect(d)).unwrap();
                    }
                }
            }
            let mut out = vec![None; ms.len()];
            for _ in 0..100 {
                for r in 0..ms.len() {
                    while let Some((to, msg)) = ms[r].poll_transmit(0) {
                        if Some(to) != dead {
                            ms[to as usize]
                                .handle(0, Event::Message { from: r as Rank, msg })
                                .unwrap();
                        }
                    }
                    if let Some(o) = ms[r].poll_output() {
                        out[r] = Some(o);
                    }
                }
            }
            out
        };
        let out = run(&mut ms, None);
        assert!(
            out.iter()
                .all(|o| o.as_ref().is_some_and(|o| o.ok() && o.value == And64(!0b1111)))
        );
        let out = run(&mut ms, Some(2));
        for (r, o) in out.iter().enumerate() {
            if r != 2 {
                let o = o.as_ref().unwrap();
                assert_eq!(o.value, And64(!0b1011), "rank {r}");
                assert!(o.failed.contains(2));
            }
        }
    }
}
