# Multi-stage build: a static (musl) volguard binary on an empty base image, running as non-root.
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools && rm -rf /var/lib/apt/lists/* \
 && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY benches ./benches
RUN cargo build --locked --release --target x86_64-unknown-linux-musl --bin volguard \
 && cp target/x86_64-unknown-linux-musl/release/volguard /volguard

FROM scratch
COPY --from=build /volguard /volguard
USER 65532:65532
ENTRYPOINT ["/volguard"]
