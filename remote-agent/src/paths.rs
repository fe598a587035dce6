//! TODO: paths
