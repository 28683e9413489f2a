# For users with a Docker engine; `make image` builds the same image without one (umoci + skopeo).
# Same binary: release, stripped, fully static through glibc's crt-static; same empty base, user, entrypoint.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY crates ./crates
COPY src ./src
COPY benches ./benches
RUN RUSTFLAGS="-C target-feature=+crt-static" CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=symbols cargo build --locked --release --bin volguard \
      --target x86_64-unknown-linux-gnu --target-dir target/static \
 && cp target/static/x86_64-unknown-linux-gnu/release/volguard /volguard

FROM scratch
LABEL org.opencontainers.image.title=volguard org.opencontainers.image.licenses=Apache-2.0
COPY --from=build /volguard /volguard
USER 65532:65532
ENTRYPOINT ["/volguard"]
