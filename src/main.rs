use clap::Parser;
use volguard::cli::{Cli, Command, LogFormat};

/// mimalloc (see `volguard::alloc` for why).
#[global_allocator]
static ALLOC: volguard::alloc::Allocator = volguard::alloc::Allocator;

/// Servers log at info. A one-shot command (explain, report, fence confirm) prints its answer or
/// its one error line; only warnings of its own go to the log by default, and kube's client stays
/// quiet (it would log the same failure a second time).
fn init_logging(format: LogFormat, long_running: bool) {
    let default = if long_running {
        "info"
    } else {
        "warn,kube_client=off,kube=off"
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
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

/// The error and its causes, each once (`volguard::error::chain`).
fn chain(e: &anyhow::Error) -> String {
    volguard::error::chain(e.as_ref())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = parse_cli();
    let format = cli.log_format;
    let long_running = matches!(
        cli.command,
        Command::Serve(_)
            | Command::Controller(_)
            | Command::Fence(volguard::cli::FenceCommand::Agent(_))
    );
    init_logging(format, long_running);
    if long_running {
        tokio::spawn(volguard::alloc::purge_while_idle());
    }
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
        Command::Manifests(volguard::cli::ManifestsCommand::AdmissionDir(a)) => {
            volguard::registration::admission_dir::run(&a).map(|files| {
                for f in files {
                    eprintln!("wrote {}", f.display());
                }
            })
        }
        Command::Manifests(volguard::cli::ManifestsCommand::Webhooks { flavour }) => {
            print!("{}", volguard::registration::webhooks::render(flavour));
            Ok(())
        }
        Command::Manifests(volguard::cli::ManifestsCommand::Policies { part }) => {
            volguard::registration::policies::render(part)
                .map(|yaml| print!("{yaml}"))
                .map_err(anyhow::Error::from)
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
        // Once: a JSON line in JSON mode (every stderr line parses), else plain text; the
        // commands a person types print it as kubectl would.
        Err(e) => {
            match format {
                LogFormat::Json => tracing::error!(error = %chain(&e), "volguard failed"),
                LogFormat::Text if long_running => eprintln!("volguard: {}", chain(&e)),
                LogFormat::Text => eprintln!("{}", volguard::error::for_cli(e.as_ref())),
            }
            std::process::ExitCode::FAILURE
        }
    }
}
