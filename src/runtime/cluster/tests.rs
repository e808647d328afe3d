use super::PollMode;

#[test]
fn only_yield_sends_one_message_per_pass() {
    assert_eq!(PollMode::Yield.sends_per_pass(), 1);
    for p in [PollMode::Busy, PollMode::Adaptive, PollMode::Blocking] {
        assert!(p.sends_per_pass() > 1, "{p:?}");
    }
}
