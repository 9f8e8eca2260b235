//! The executor protocol's OpenAPI 3.1 document (`docs/executor-protocol.json`),
//! generated from the protocol's types and the table of its operations below.

use super::protocol::{self, *};
use crate::openapi::{Document, Operation, SchemaFn, document, schema, to_file};
use crate::record::ExecutorInfo;
use serde_json::json;

/// What every request carries and every answer is signed with, and the order the
/// document describes them in.
const DESCRIPTION: &str = include_str!("openapi_description.txt");

/// Refusals every signed endpoint of an instance may answer.
const SIGNED: &[(u16, &str)] = &[
    (400, "`bad_request`"),
    (
        401,
        "`unsigned`, `bad_signature`, `skewed_timestamp`, `replayed`",
    ),
    (413, "`too_large`"),
    (503, "`overloaded`"),
];

/// The registration endpoint's refusals.
const REGISTRY: &[(u16, &str)] = &[
    (
        400,
        "`bad_request` (the message names the field and the value)",
    ),
    (
        401,
        "`unsigned`, `bad_signature`, `skewed_timestamp`, `replayed` — signed; a body naming a group the endpoint does not serve is checked against a decoy secret and refused as a bad signature is, signed with the decoy, so a caller without a group's secret learns nothing about which groups exist",
    ),
    (413, "`too_large` (unsigned: the body was not read)"),
    (
        503,
        "`unavailable` (the store refused the write), or `overloaded`",
    ),
];

const RUN_REFUSALS: &[(u16, &str)] = &[
    (400, "`bad_request`"),
    (
        401,
        "`unsigned`, `bad_signature`, `skewed_timestamp`, `replayed`",
    ),
    (409, "`discarded`, `conflict`"),
    (413, "`too_large`"),
    (422, "`unknown_handler`"),
    (429, "`busy`"),
    (503, "`overloaded`"),
];

const ABOUT_A_RUN: &[(u16, &str)] = &[
    (400, "`bad_request`"),
    (
        401,
        "`unsigned`, `bad_signature`, `skewed_timestamp`, `replayed`",
    ),
    (404, "`unknown_run`"),
    (413, "`too_large`"),
    (503, "`overloaded`"),
];

fn op(
    path: &'static str,
    id: &'static str,
    tag: &'static str,
    summary: &'static str,
    description: &'static str,
    (body, answer): (SchemaFn, SchemaFn),
    refusals: &'static [(u16, &'static str)],
) -> Operation {
    Operation {
        method: "post",
        path,
        id,
        tag,
        summary,
        description,
        path_params: &[],
        query: None,
        body: Some((body, false)),
        ok: (200, "Answered.", Some(answer)),
        refusals,
        role: None,
    }
}

/// The protocol's operations: what an instance serves, then what a scheduler's
/// registration endpoint serves.
fn operations() -> Vec<Operation> {
    vec![
        op(
            protocol::BEAT,
            "beat",
            "executor",
            "Liveness",
            "Answers the instance's handlers and load. Failover routing asks instances in address order and takes the first that answers. The body is any JSON (`{}`).",
            (schema::<serde_json::Value>, schema::<Beat>),
            SIGNED,
        ),
        op(
            protocol::IDLE_BEAT,
            "idleBeat",
            "executor",
            "Idle for a job?",
            "Busy-over routing asks instances in address order and takes the first idle for the job.",
            (schema::<IdleBeatRequest>, schema::<IdleBeat>),
            SIGNED,
        ),
        op(
            protocol::RUN,
            "run",
            "executor",
            "Start a run",
            "Admits a run under its block strategy: runs it now (`running`), queues it behind the job's running run (`queued`, serial), refuses it (409 `discarded`, discard_later), or cancels the running run and runs this one (cover_early). A request for a run already admitted with the same token answers its state. With `wait_ms`, waits that long for the run to end before answering.",
            (schema::<RunRequest>, schema::<RunState>),
            RUN_REFUSALS,
        ),
        op(
            protocol::RESULT,
            "result",
            "executor",
            "A run's state or result",
            "Waits up to wait_ms for the run to end, then answers its state; `outcome` once done.",
            (schema::<ResultRequest>, schema::<RunState>),
            ABOUT_A_RUN,
        ),
        op(
            protocol::KILL,
            "kill",
            "executor",
            "Cancel a run",
            "Cancels a queued or running run through its context; its outcome is then `cancelled`.",
            (schema::<KillRequest>, schema::<KillReply>),
            ABOUT_A_RUN,
        ),
        op(
            protocol::LOG,
            "log",
            "executor",
            "A run's log lines",
            "The run's log lines from an offset; a client tails a run by asking from next_offset until done.",
            (schema::<LogRequest>, schema::<LogChunk>),
            ABOUT_A_RUN,
        ),
        op(
            protocol::REGISTER,
            "registryBeat",
            "registry",
            "Register, or beat",
            "Served by a scheduler's registration endpoint (jobwheel's RegistryServer), not by an instance: the instance asks, every beat (30 s by default; schedulers count it dead after 90 s without one). The beat is written with the store's clock. Signed with the secret of the group the body names.",
            (schema::<ExecutorInfo>, schema::<Registered>),
            REGISTRY,
        ),
        op(
            protocol::LEAVE,
            "registryLeave",
            "registry",
            "Leave the group",
            "Served by a scheduler's registration endpoint: the instance asks when it stops, and runs no longer go to it. Without it, the registration lapses after the schedulers' dead_after.",
            (schema::<LeaveRequest>, schema::<Left>),
            REGISTRY,
        ),
    ]
}

/// The executor protocol's OpenAPI 3.1 document, as `docs/executor-protocol.json`
/// holds it (the tests keep the committed copy equal to this).
pub fn openapi() -> String {
    let doc = Document {
        info: json!({
            "title": "jobwheel executor protocol",
            "version": "1",
            "description": DESCRIPTION.trim_end(),
        }),
        servers: json!([{"url": "http://127.0.0.1:9101", "description": "An executor instance."}]),
        tags: json!([
            {"name": "executor", "description": "Served by an executor instance; the scheduler asks."},
            {"name": "registry", "description": "Served by a scheduler's registration endpoint; the instance asks."},
        ]),
        components: json!({
            "parameters": {
                "Timestamp": {
                    "name": "x-jobwheel-timestamp", "in": "header", "required": true,
                    "schema": {"type": "string", "pattern": "^-?[0-9]+$"},
                    "description": "Unix ms on the receiver's clock, as the sender estimates it.",
                },
                "Nonce": {
                    "name": "x-jobwheel-nonce", "in": "header", "required": true,
                    "schema": {"type": "string", "pattern": "^[0-9a-fA-F]{16,64}$"},
                },
                "Signature": {
                    "name": "x-jobwheel-signature", "in": "header", "required": true,
                    "schema": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                    "description": "hex HMAC-SHA256 of the request (see the description above).",
                },
            },
            "headers": {
                "Timestamp": {"required": true, "schema": {"type": "string"}, "description": "The responder's clock, unix ms."},
                "Signature": {"required": true, "schema": {"type": "string"}, "description": "hex HMAC-SHA256 of the answer, bound to the request's nonce."},
            },
            "securitySchemes": {
                "signature": {
                    "type": "apiKey", "in": "header", "name": "x-jobwheel-signature",
                    "description": "With x-jobwheel-timestamp and x-jobwheel-nonce; see the description above.",
                },
            },
        }),
        security: Some(json!([{"signature": []}])),
        root_security: None,
        common_params: json!([
            {"$ref": "#/components/parameters/Timestamp"},
            {"$ref": "#/components/parameters/Nonce"},
            {"$ref": "#/components/parameters/Signature"},
        ]),
        response_headers: Some(json!({
            "x-jobwheel-timestamp": {"$ref": "#/components/headers/Timestamp"},
            "x-jobwheel-signature": {"$ref": "#/components/headers/Signature"},
        })),
        error: schema::<ErrorBody>,
    };
    to_file(&document(&doc, &operations()))
}
