//! Communication topologies: dissemination trees (interleaved and in-order), the correction
//! ring and the binomial graph.
