#!/usr/bin/env python3
"""Writes testkit/contract/*.json: what each vendor's API accepts in a request body, read from the
request types of the vendor's own SDK (generated from its API spec), at the versions pinned in
scripts/contract/requirements.txt. The fake upstreams validate every body against these and refuse
what the real API refuses, with its wording; regenerate after bumping the pins:

    python3 -m venv /tmp/contract && /tmp/contract/bin/pip install -r scripts/contract/requirements.txt
    /tmp/contract/bin/python scripts/contract/generate.py

The output is a small subset of JSON Schema (type, properties, required, additionalProperties,
items, anyOf, enum, $ref into $defs; for AWS's service models also minimum, maximum, minLength,
maxLength, pattern, minItems, maxItems and `oneMember`, a Smithy union's one member set) that
testkit/src/contract.rs understands. `generate.py bedrock` writes one vendor's files only.
"""
import datetime
import enum
import json
import pathlib
import sys
import typing

import typing_extensions as te

OUT = pathlib.Path(__file__).resolve().parents[2] / "testkit" / "contract"

# Header parameters the SDKs model beside the body; never part of a body.
NOT_BODY = {"betas", "extra_headers", "extra_query", "extra_body", "timeout"}


def origin(t):
    return te.get_origin(t)


def declared(t, field):
    """The totality of the TypedDict that declares `field` (a subclass may differ from its base:
    `class Streaming(Base)` is total while `Base` is not) and the field's annotation as written."""
    # A TypedDict's `__annotations__` holds its bases' fields too: ask the bases first.
    for base in getattr(t, "__orig_bases__", ()):
        if te.is_typeddict(base):
            found = declared(base, field)
            if found is not None:
                return found
    own = t.__dict__.get("__annotations__", {})
    if field in own:
        a = own[field]
        return t.__total__, getattr(a, "__forward_arg__", a)
    return None


class Builder:
    def __init__(self, camel=False):
        self.defs = {}
        self.camel = camel

    def name(self, field):
        if not self.camel:
            return field
        head, *rest = field.split("_")
        return head + "".join(p[:1].upper() + p[1:] for p in rest)

    def of(self, t):
        o = origin(t)
        args = te.get_args(t)
        if o in (te.Required, te.NotRequired, typing.ClassVar):
            return self.of(args[0])
        if o is te.Annotated:
            return self.of(args[0])
        if o in (typing.Union, getattr(__import__("types"), "UnionType", None)):
            branches = [self.of(a) for a in args]
            return {"anyOf": branches}
        if o is te.Literal:
            return {"enum": list(args)}
        if t is type(None):
            return {"type": "null"}
        if t is str:
            return {"type": "string"}
        if t is bytes:
            return {"type": "string"}  # base64 on the wire
        if t is bool:
            return {"type": "boolean"}
        if t is int:
            return {"type": "integer"}
        if t is float:
            return {"type": "number"}
        if t in (datetime.datetime, datetime.date, datetime.timedelta) or o is typing.IO or t is typing.IO:
            return {"type": "string"}
        if t in (object, typing.Any) or t is te.Any:
            return {}
        if isinstance(t, type) and issubclass(t, enum.Enum):
            return {"type": "string", "enumAnyCase": [m.value for m in t]}
        if o in (dict, typing.Dict) or (o is not None and getattr(o, "__name__", "") in ("Mapping", "MutableMapping")):
            return {"type": "object", "additionalProperties": self.of(args[1]) if len(args) == 2 else {}}
        if o in (list, tuple, set, frozenset) or (o is not None and getattr(o, "__name__", "") in ("Iterable", "Sequence", "SequenceNotStr", "List")):
            return {"type": "array", "items": self.of(args[0]) if args else {}}
        if getattr(t, "__name__", "") == "SequenceNotStr":
            return {"type": "array"}
        if te.is_typeddict(t):
            return self.typeddict(t)
        if hasattr(t, "model_fields"):
            return self.model(t)
        if isinstance(t, te.TypeAliasType if hasattr(te, "TypeAliasType") else ()):
            return self.of(t.__value__)
        if isinstance(t, type) and t.__module__ in ("os", "io", "pathlib", "typing"):
            return {"type": "string"}  # a file the SDK uploads: a string (file id, data) on the wire
        raise TypeError(f"no schema for {t!r}")

    def ref(self, key, build):
        if key not in self.defs:
            self.defs[key] = None  # recursion guard
            self.defs[key] = build()
        return {"$ref": f"#/$defs/{key}"}

    def typeddict(self, t):
        def build():
            hints = te.get_type_hints(t, include_extras=True)
            props, required = {}, []
            for field, h in hints.items():
                if field in NOT_BODY:
                    continue
                wire = field
                for meta in getattr(h, "__metadata__", ()):
                    wire = getattr(meta, "alias", None) or wire
                props[wire] = self.of(h)
                # Read from the annotation: with `from __future__ import annotations` (as the
                # SDKs are written) `__required_keys__` does not see `Required[...]`.
                total, raw = declared(t, field) or (t.__total__, "")
                raw = raw if isinstance(raw, str) else repr(raw)
                # `Required[Optional[X]]` is a Stainless SDK making its callers say null out
                # loud (the spec lists nullable response fields as required); the API takes
                # the field absent (OpenAI's function tool `strict` defaults when left out).
                required_mark = raw.startswith(("Required[", "typing_extensions.Required[")) \
                    and "Optional[" not in raw.split("[", 1)[1][:9]
                optional_mark = raw.startswith(("NotRequired[", "typing_extensions.NotRequired["))
                if required_mark or (total and not optional_mark):
                    required.append(wire)
            return {"type": "object", "properties": props, "required": required,
                    "additionalProperties": False}
        return self.ref(f"{t.__module__.split('.')[-1]}.{t.__name__}", build)

    def model(self, t):
        def build():
            props = {}
            for field, info in t.model_fields.items():
                props[info.alias or self.name(field)] = self.of(info.annotation)
            return {"type": "object", "properties": props, "required": [],
                    "additionalProperties": False}
        return self.ref(t.__name__, build)


def write(name, root, builder, source):
    doc = {"$comment": f"Generated by scripts/contract/generate.py from {source}; do not edit.",
           "$defs": builder.defs, **root}
    (OUT / name).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def anthropic():
    import anthropic
    from anthropic.types import message_create_params as m, message_count_tokens_params as c
    from anthropic.types.beta import message_create_params as bm
    src = f"anthropic=={anthropic.__version__} (Python SDK)"
    b = Builder()
    root = b.of(te.Union[m.MessageCreateParamsNonStreaming, m.MessageCreateParamsStreaming])
    write("anthropic-messages.json", root, b, src)
    b = Builder()
    root = b.of(te.Union[bm.MessageCreateParamsNonStreaming, bm.MessageCreateParamsStreaming])
    write("anthropic-beta-messages.json", root, b, src)
    b = Builder()
    write("anthropic-count-tokens.json", b.of(c.MessageCountTokensParams), b, src)


def openai():
    import openai
    from openai.types.chat import completion_create_params as cc
    from openai.types.responses import response_create_params as rc
    src = f"openai=={openai.__version__} (Python SDK)"
    b = Builder()
    write("openai-chat.json", b.of(te.Union[cc.CompletionCreateParamsNonStreaming,
                                           cc.CompletionCreateParamsStreaming]), b, src)
    b = Builder()
    write("openai-responses.json", b.of(te.Union[rc.ResponseCreateParamsNonStreaming,
                                                rc.ResponseCreateParamsStreaming]), b, src)


def gemini():
    from google.genai import types, version
    src = (f"google-genai=={version.__version__} (Python SDK: its wire models, and the top level "
           "its _GenerateContentParameters_to_mldev converter writes)")
    b = Builder(camel=True)
    props = {
        "contents": {"type": "array", "items": b.of(types.Content)},
        "systemInstruction": b.of(types.Content),
        "tools": {"type": "array", "items": b.of(types.Tool)},
        "toolConfig": b.of(types.ToolConfig),
        "safetySettings": {"type": "array", "items": b.of(types.SafetySetting)},
        "generationConfig": b.of(types.GenerationConfig),
        "cachedContent": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "serviceTier": {"type": "string"},
        "store": {"type": "boolean"},
    }
    # The SDK's `Schema` serves both backends; the Gemini Developer API (what a `gemini` provider
    # calls) refuses `additionalProperties` (_transformers._raise_for_unsupported_mldev_properties)
    # and has no `$ref`/`$defs` (process_schema inlines them for it). Full JSON Schema goes in
    # `parametersJsonSchema` / `responseJsonSchema`, which take any value.
    for key in ("additionalProperties", "defs", "ref"):
        b.defs["Schema"]["properties"].pop(key)
    root = {"type": "object", "properties": props, "required": ["contents"],
            "additionalProperties": False}
    write("gemini-generate-content.json", root, b, src)


def bedrock():
    """Bedrock's Converse and ConverseStream bodies, from botocore's service model of
    bedrock-runtime (the JSON every AWS SDK is generated from): structures, Smithy unions (one
    member set), lists and maps, enums, and the length and range constraints AWS checks before a
    model sees the request. Members bound to the URI (`modelId`) are not in the body."""
    import botocore
    import botocore.session
    model = botocore.session.get_session().get_service_model("bedrock-runtime")
    src = f"botocore=={botocore.__version__} (bedrock-runtime {model.api_version} service model)"

    def of(shape, defs):
        t = shape.type_name
        bounds = shape.metadata
        if bounds.get("document"):
            return {}  # any JSON value
        if t == "structure":
            key = shape.name
            if key not in defs:
                defs[key] = None
                props, required = {}, []
                for name, member in shape.members.items():
                    if member.serialization.get("location"):
                        continue
                    props[name] = of(member, defs)
                    if name in shape.required_members:
                        required.append(name)
                d = {"type": "object", "properties": props, "required": required,
                     "additionalProperties": False}
                if shape.is_tagged_union:
                    d["oneMember"] = True
                defs[key] = d
            return {"$ref": f"#/$defs/{key}"}
        if t == "list":
            d = {"type": "array", "items": of(shape.member, defs)}
            if "min" in bounds:
                d["minItems"] = bounds["min"]
            if "max" in bounds:
                d["maxItems"] = bounds["max"]
            return d
        if t == "map":
            return {"type": "object", "additionalProperties": of(shape.value, defs)}
        if t == "string" and shape.enum:
            return {"enum": list(shape.enum)}
        if t in ("string", "blob", "timestamp"):
            d = {"type": "string"}
            if t == "string" and "min" in bounds:
                d["minLength"] = bounds["min"]
            if t == "string" and "max" in bounds:
                d["maxLength"] = bounds["max"]
            if t == "string" and "pattern" in bounds:
                d["pattern"] = bounds["pattern"]  # the whole value must match (AWS's check)
            return d
        if t in ("integer", "long", "float", "double"):
            d = {"type": "integer" if t in ("integer", "long") else "number"}
            if "min" in bounds:
                d["minimum"] = bounds["min"]
            if "max" in bounds:
                d["maximum"] = bounds["max"]
            return d
        if t == "boolean":
            return {"type": "boolean"}
        raise TypeError(f"no schema for {shape.name} ({t})")

    for op, name in (("Converse", "bedrock-converse.json"),
                     ("ConverseStream", "bedrock-converse-stream.json")):
        defs = {}
        root = of(model.operation_model(op).input_shape, defs)
        # The root inline: the body is the request shape itself.
        top = defs.pop(root["$ref"].rsplit("/", 1)[1])
        doc = {"$comment": f"Generated by scripts/contract/generate.py from {src}; do not edit.",
               "$defs": defs, **top}
        (OUT / name).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    every = {"anthropic": anthropic, "openai": openai, "gemini": gemini, "bedrock": bedrock}
    for name in sys.argv[1:] or every:
        every[name]()
    print(f"wrote {sorted(p.name for p in OUT.glob('*.json'))}", file=sys.stderr)
