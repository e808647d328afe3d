//! Job ids, run ids and session keys of the experiments: derived in one place,
//! [`crate::transport::ids`] (the table of what each experiment's ids are built from is
//! there), re-exported here for the launchers.

pub use crate::transport::ids::{
    LOGP_RENDEZVOUS, RunId, agree, bench, bootstrap, bootstrap_run_id, fresh_session, logp_between, node_hop, run_nonce,
};
