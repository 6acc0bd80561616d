# A small static image: the operator built for musl on Alpine, copied into
# distroless/static (CA certificates for AWS, a non-root user, no shell).
#   docker build -t cloud-resource-operator:0.1.0 .
# Untested: CI cannot pull these base images, so it builds the image with
# deploy/image/build.sh (make image, make release). The test
# deploy::the_dockerfile_keeps_the_image_contract_of_make_image holds the
# user, entrypoint, command, port and toolchain here to that script's.

FROM docker.io/library/rust:1.95-alpine AS build
# aws-lc-rs (the TLS crypto of kube and the AWS SDK) builds C code.
RUN apk add --no-cache musl-dev build-base cmake perl
WORKDIR /src
# Dependencies first, so editing the operator does not rebuild them.
COPY Cargo.toml Cargo.lock rust-toolchain.toml ./
COPY runtime/Cargo.toml runtime/Cargo.toml
COPY providers/api/Cargo.toml providers/api/Cargo.toml
COPY providers/kube/Cargo.toml providers/kube/Cargo.toml
COPY providers/aws/Cargo.toml providers/aws/Cargo.toml
COPY providers/in-cluster/Cargo.toml providers/in-cluster/Cargo.toml
RUN for d in . runtime providers/api providers/kube providers/aws providers/in-cluster; do \
      mkdir -p $d/src && echo 'fn main() {}' > $d/src/main.rs && touch $d/src/lib.rs; \
    done \
 && cargo build --release --locked --bin cloud-resource-operator || true
COPY . .
# Touch the sources so cargo rebuilds them over the placeholders above.
RUN find src runtime providers -name '*.rs' -exec touch {} + \
 && cargo build --release --locked --bin cloud-resource-operator \
 && strip target/release/cloud-resource-operator

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/target/release/cloud-resource-operator /cloud-resource-operator
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/cloud-resource-operator"]
CMD ["run"]
