//! Sans-IO protocol state machines.
