//! The `ftcoll` binary.

fn main() {
    std::process::exit(ftcoll::cli::main_with_args(std::env::args_os()));
}
