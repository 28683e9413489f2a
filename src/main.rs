use clap::Parser;
use volguard::cli::{Cli, Command, LogFormat};

/// mimalloc (see `volguard::alloc` for why).
#[global_allocator]
static ALLOC: volguard::alloc::Allocator = volguard::alloc::Allocator;

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .init(),
        LogFormat::Text => builder.init(),
    }
}

/// Installed as `kubectl-volguard` (a symlink), kubectl's plugin lookup runs this binary for
/// `kubectl volguard ...`; help and errors then name the command as the user typed it.
fn parse_cli() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let plugin = std::env::args_os()
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .is_some_and(|n| n == "kubectl-volguard");
    if !plugin {
        return Cli::parse();
    }
    let matches = Cli::command()
        .name("kubectl volguard")
        .bin_name("kubectl volguard")
        .get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = parse_cli();
    let format = cli.log_format;
    init_logging(format);
    let result = match cli.command {
        Command::Serve(args) => volguard::server::run(args).await,
        Command::Controller(args) => volguard::controller::run(args).await,
        Command::Report(volguard::cli::ReportCommand::Unused(args)) | Command::Unused(args) => {
            volguard::report::run(args).await
        }
        Command::Explain(args) => volguard::explain::run(args).await,
        Command::Fence(volguard::cli::FenceCommand::Confirm(args)) => {
            volguard::fencing::confirm::run(args).await
        }
        Command::Fence(volguard::cli::FenceCommand::Agent(args)) => {
            volguard::fencing::agent::run(args).await
        }
        Command::Version => {
            println!("{}", volguard::runtime::build::describe());
            Ok(())
        }
        Command::DevCerts(args) => volguard::devcerts::generate(&args.sans)
            .map_err(anyhow::Error::from)
            .and_then(|pki| {
                volguard::devcerts::write(&args.out_dir, &pki).map_err(anyhow::Error::from)
            })
            .map(|()| {
                eprintln!(
                    "wrote {}/{{ca.crt,tls.crt,tls.key}}",
                    args.out_dir.display()
                )
            }),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // Once: a JSON line in JSON mode (every stderr line parses), else plain text.
        Err(e) => {
            match format {
                LogFormat::Json => tracing::error!(error = %format!("{e:#}"), "volguard failed"),
                LogFormat::Text => eprintln!("volguard: {e:#}"),
            }
            std::process::ExitCode::FAILURE
        }
    }
}
