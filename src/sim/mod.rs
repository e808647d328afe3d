//! LogP discrete-event simulator.
