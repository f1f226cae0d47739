//! es: the command-line client for the es broker's HTTP API (work in progress).

fn main() {
    eprintln!("es: the client is not implemented yet; use the HTTP API (docs/http-api.md)");
    std::process::exit(2);
}
