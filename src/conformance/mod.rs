//! Conformance suites (placeholder)
