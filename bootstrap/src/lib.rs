//! `reasonix-bootstrap`: reach a host over SSH and start `reasonix-remote` there.
