//! `reasonix`: the laptop binary. The command line lives in [`cli`]; this only turns its
//! error into the one message and the exit code (see `reasonix_local::exit`).

mod cli;

fn main() -> std::process::ExitCode {
    match cli::run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            e.print();
            e.exit.into()
        }
    }
}
