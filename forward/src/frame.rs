//! Length-prefixed frames carrying `seq` and `ack`. See `docs/PROTOCOL.md`.
