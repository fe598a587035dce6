//! `reasonix`: the laptop side (CLI, config, TUI, provider gateway).
