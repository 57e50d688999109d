//! Compiles proto/agentharness/v1 with protox (no system protoc): prost
//! messages, tonic client (and server, with the `server` feature), serde
//! impls following the proto3 JSON mapping (pbjson), and the encoded
//! descriptor set that server reflection serves.

use std::path::PathBuf;

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read at run time, not with env!(): a build-script binary cached for a
    // copy of the tree elsewhere must still read this tree's protos. `proto`
    // is a symlink to the repository's proto/ (the one contract every client
    // is generated from); `cargo package` copies what it points to, so the
    // packaged crate carries the .proto files and builds on its own.
    let proto_root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");
    let files = [
        proto_root.join("agentharness/v1/events.proto"),
        proto_root.join("agentharness/v1/session_service.proto"),
    ];
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let fds = protox::compile(&files, [&proto_root])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let descriptor_path = out.join("agentharness_descriptor.bin");
    std::fs::write(&descriptor_path, fds.encode_to_vec())?;

    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .compile_well_known_types(true)
        .extern_path(".google.protobuf", "::pbjson_types")
        .compile_fds(fds.clone())?;
    if std::env::var_os("CARGO_FEATURE_SERVER").is_some() {
        // The server apart, over the same messages, with a codec that
        // answers an undecodable request INVALID_ARGUMENT (see `codec`).
        let server_out = out.join("server");
        std::fs::create_dir_all(&server_out)?;
        tonic_prost_build::configure()
            .build_server(true)
            .build_client(false)
            .out_dir(&server_out)
            .codec_path("crate::codec::RequestCodec")
            .compile_well_known_types(true)
            .extern_path(".agentharness.v1", "crate::pb")
            .extern_path(".google.protobuf", "::pbjson_types")
            .compile_fds(fds.clone())?;
    }

    pbjson_build::Builder::new()
        .register_descriptors(&std::fs::read(&descriptor_path)?)?
        .build(&[".agentharness"])?;
    Ok(())
}
