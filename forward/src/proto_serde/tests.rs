//! The hand-written decoders of the tagged `proto` enums against serde's derived ones: a
//! sample of every variant (every field filled), encoded, must decode to the same value both
//! ways and encode back to the same bytes; mutations of each sample (a field dropped, a field
//! of the wrong type, the tag missing or unknown, an unknown field, not an object) must be
//! accepted or refused alike, and accepted to the same value; and the fuzz corpus and
//! hand-written journal lines decode alike.

use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, IntoDeserializer, Visitor};
use serde::Serialize;
use serde_json::Value;

use super::{Legacy, Sampled};
use crate::proto::{Envelope, Event, EventKind, Notification, ProviderChunk, Request, Response};

/// Produces a sample of whatever type decodes from it: every field present, numbers 1,
/// strings "c2Ft", one element per list, variant `pick` of the first enum and the first
/// variant of the others. Tagged enums nested in the sample come from [`nested`].
pub(crate) struct SampleDe {
    pick: usize,
    depth: usize,
}

impl SampleDe {
    pub(crate) fn top(pick: usize) -> Self {
        SampleDe { pick, depth: 0 }
    }
    fn inner(&self) -> Self {
        SampleDe {
            pick: 0,
            depth: self.depth + 1,
        }
    }
}

fn expecting<'de, V: Visitor<'de>>(v: &V) -> String {
    struct W<'a, V>(&'a V);
    impl<'de, V: Visitor<'de>> std::fmt::Display for W<'_, V> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            self.0.expecting(f)
        }
    }
    W(v).to_string()
}

fn to_value<T: Serialize>(v: Result<T, serde_json::Error>) -> Value {
    serde_json::to_value(v.expect("sample")).expect("encode")
}

/// Samples of the tagged enums nested in others, by the name their decoder expects.
fn nested(what: &str) -> Option<Value> {
    // The variants with a flattened action.
    let flattened = |action: Value| {
        let mut v = action;
        v.as_object_mut()?
            .insert("request_id".into(), Value::from("s"));
        Some(v)
    };
    match what {
        "struct variant RequestDe::Plan" => {
            return flattened(to_value(crate::plan::PlanAction::sample(0)))
        }
        "struct Event" => {
            let mut v = to_value(EventKind::sample(0));
            let obj = v.as_object_mut()?;
            obj.insert("seq".into(), Value::from(1));
            obj.insert("ts".into(), Value::from("s"));
            obj.insert("turn".into(), Value::from(1));
            return Some(v);
        }
        "struct variant RequestDe::Goal" => {
            return flattened(to_value(crate::goal::GoalAction::sample(0)))
        }
        _ => {}
    }
    let name = what.strip_prefix("internally tagged enum ")?;
    Some(match name {
        "Request" => to_value(Request::sample(0)),
        "Response" => to_value(Response::sample(0)),
        "Notification" => to_value(Notification::sample(0)),
        "EventKind" => to_value(EventKind::sample(0)),
        "ProviderChunk" => to_value(ProviderChunk::sample(0)),
        "ChannelMsg" => to_value(crate::channel::ChannelMsg::sample(0)),
        "ChannelOpen" => to_value(crate::channel::ChannelOpen::sample(0)),
        "ChannelAccepted" => to_value(crate::channel::ChannelAccepted::sample(0)),
        "ChannelData" => to_value(crate::channel::ChannelData::sample(0)),
        "PtyOpen" => to_value(crate::pty::PtyOpen::sample(0)),
        "PtyRequest" => to_value(crate::pty::PtyRequest::sample(0)),
        "PtyResponse" => to_value(crate::pty::PtyResponse::sample(0)),
        "PtyData" => to_value(crate::pty::PtyData::sample(0)),
        "GoalAction" => to_value(crate::goal::GoalAction::sample(0)),
        "GoalEvent" => to_value(crate::goal::GoalEvent::sample(0)),
        "PlanAction" => to_value(crate::plan::PlanAction::sample(0)),
        "PlanEvent" => to_value(crate::plan::PlanEvent::sample(0)),
        "MemoryOp" => to_value(crate::memory::ops::MemoryOp::sample(0)),
        _ => return None,
    })
}

impl<'de> Deserializer<'de> for SampleDe {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match nested(&expecting(&visitor)) {
            Some(v) => v.deserialize_any(visitor),
            // Valid base64 too (terminal bytes are).
            None => visitor.visit_str("c2Ft"),
        }
    }
    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_bool(true)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_u64(1)
    }
    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_f64(0.5)
    }
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        if self.depth > 4 {
            visitor.visit_none()
        } else {
            visitor.visit_some(self.inner())
        }
    }
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        let items: Vec<SampleDe> = if self.depth > 4 {
            vec![]
        } else {
            vec![self.inner()]
        };
        visitor.visit_seq(de::value::SeqDeserializer::new(items.into_iter()))
    }
    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        let items: Vec<SampleDe> = (0..len).map(|_| self.inner()).collect();
        visitor.visit_seq(de::value::SeqDeserializer::new(items.into_iter()))
    }
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        if let Some(v) = nested(&expecting(&visitor)) {
            return v.deserialize_map(visitor);
        }
        let entries = vec![("k", self.inner())];
        visitor.visit_map(de::value::MapDeserializer::new(entries.into_iter()))
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        let entries: Vec<(&str, SampleDe)> = fields.iter().map(|f| (*f, self.inner())).collect();
        visitor.visit_map(de::value::MapDeserializer::new(entries.into_iter()))
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        let name = variants.get(self.pick).copied().unwrap_or("?");
        visitor.visit_enum(SampleVariant {
            name,
            de: self.inner(),
        })
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }
    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i32 i64 i128 u128 char str string bytes byte_buf unit_struct
        tuple_struct identifier ignored_any
    }
    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_u64(1)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_u64(1)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_u64(1)
    }
    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_f64(0.5)
    }
}

impl<'de> IntoDeserializer<'de, serde_json::Error> for SampleDe {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

struct SampleVariant {
    name: &'static str,
    de: SampleDe,
}

impl<'de> de::EnumAccess<'de> for SampleVariant {
    type Error = serde_json::Error;
    type Variant = SampleDe;
    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, SampleDe), serde_json::Error> {
        let v = seed.deserialize(self.name.into_deserializer())?;
        Ok((v, self.de))
    }
}

impl<'de> de::VariantAccess<'de> for SampleDe {
    type Error = serde_json::Error;
    fn unit_variant(self) -> Result<(), serde_json::Error> {
        Ok(())
    }
    fn newtype_variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<S::Value, serde_json::Error> {
        seed.deserialize(self)
    }
    fn tuple_variant<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, serde_json::Error> {
        self.deserialize_tuple(len, visitor)
    }
    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, serde_json::Error> {
        self.deserialize_struct("", fields, visitor)
    }
}

/// Decodes `json` both ways: both must refuse it, or both accept it as the same value.
/// Returns the value when accepted.
fn same_both_ways<T>(json: &str) -> Option<T>
where
    T: DeserializeOwned + std::fmt::Debug + PartialEq,
    Legacy<T>: DeserializeOwned,
{
    let new = serde_json::from_str::<T>(json);
    let old = serde_json::from_str::<Legacy<T>>(json);
    match (new, old) {
        (Ok(new), Ok(Legacy(old))) => {
            assert_eq!(new, old, "{json}");
            Some(new)
        }
        (Err(_), Err(_)) => None,
        (new, old) => panic!("decoded differently: {json}\nnew: {new:?}\nserde's: {old:?}"),
    }
}

/// Mutations of one encoded object: each field dropped (the tag too), each field replaced by
/// a value of another type (the tag by an unknown variant `"x"`), an unknown field added, and
/// the whole thing as an array or null.
fn mutations(v: &Value, tag: &str) -> Vec<Value> {
    let mut out = vec![Value::Array(vec![v.clone()]), Value::Null];
    let Some(obj) = v.as_object() else { return out };
    let mut extra = obj.clone();
    extra.insert("zz_unknown".into(), Value::from(1));
    out.push(Value::Object(extra));
    for key in obj.keys() {
        let mut dropped = obj.clone();
        dropped.remove(key);
        out.push(Value::Object(dropped));
        for wrong in [
            Value::from(7),
            Value::from("x"),
            Value::Array(vec![]),
            Value::Null,
        ] {
            if key == tag && wrong.is_number() {
                continue; // see `integer_tags_are_refused`
            }
            let mut changed = obj.clone();
            changed.insert(key.clone(), wrong);
            out.push(Value::Object(changed));
        }
    }
    out
}

/// Every variant of `T`: sampled, encoded, decoded both ways, re-encoded byte for byte; then
/// its mutations decoded both ways. Returns the samples' JSON.
fn every_variant<T>() -> Vec<String>
where
    T: Sampled + Serialize + DeserializeOwned + std::fmt::Debug + PartialEq,
    Legacy<T>: DeserializeOwned,
{
    let mut out = Vec::new();
    for (i, name) in T::variants().iter().enumerate() {
        let value = T::sample(i).unwrap_or_else(|e| panic!("sample of {name}: {e}"));
        let json = serde_json::to_string(&value).expect("encode");
        let back: T = same_both_ways(&json).unwrap_or_else(|| panic!("{name} refused: {json}"));
        assert_eq!(back, value, "{json}");
        assert_eq!(serde_json::to_string(&back).expect("encode"), json);
        let v: Value = serde_json::from_str(&json).expect("json");
        for m in mutations(&v, T::tag()) {
            same_both_ways::<T>(&m.to_string());
        }
        out.push(json);
    }
    out
}

#[test]
fn every_variant_decodes_as_serde_derived_decoder_did() {
    let r = every_variant::<Request>();
    assert_eq!(r.len(), Request::variants().len());
    #[cfg(feature = "client")] // see `the_host_decodes_only_the_answers_to_its_own_requests`
    every_variant::<Response>();
    #[cfg(feature = "client")] // see `the_host_decodes_no_notification_but_dropped`
    every_variant::<Notification>();
    every_variant::<EventKind>();
    every_variant::<ProviderChunk>();
    every_variant::<crate::channel::ChannelMsg>();
    every_variant::<crate::channel::ChannelOpen>();
    every_variant::<crate::channel::ChannelAccepted>();
    every_variant::<crate::channel::ChannelData>();
    every_variant::<crate::pty::PtyOpen>();
    every_variant::<crate::pty::PtyRequest>();
    every_variant::<crate::pty::PtyResponse>();
    every_variant::<crate::pty::PtyData>();
    every_variant::<crate::goal::GoalAction>();
    every_variant::<crate::goal::GoalEvent>();
    every_variant::<crate::plan::PlanAction>();
    every_variant::<crate::plan::PlanEvent>();
    every_variant::<crate::memory::ops::MemoryOp>();
    every_variant::<crate::workspaces::StatusLine>();
    every_variant::<crate::attach::AttachReport>();
    every_variant::<crate::copy::Ctl>();
    for json in every_variant::<Envelope>() {
        assert!(json.starts_with("{\"t\":"), "{json}");
    }
}

/// A journal line as serde's derived decoder read it (`kind` flattened).
#[derive(serde::Deserialize)]
struct OldEvent {
    seq: u64,
    ts: String,
    turn: u64,
    #[serde(flatten)]
    kind: Legacy<EventKind>,
}

impl<'de> serde::Deserialize<'de> for Legacy<Event> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let o = OldEvent::deserialize(d)?;
        Ok(Legacy(Event {
            seq: o.seq,
            ts: o.ts,
            turn: o.turn,
            kind: o.kind.0,
        }))
    }
}

#[test]
fn journal_lines_decode_as_serde_derived_decoder_did() {
    for i in 0..EventKind::variants().len() {
        let ev = Event {
            seq: 3,
            ts: "2026-12-05T10:00:00Z".into(),
            turn: 2,
            kind: EventKind::sample(i).expect("sample"),
        };
        let json = serde_json::to_string(&ev).expect("encode");
        let back: Event = same_both_ways(&json).unwrap_or_else(|| panic!("refused: {json}"));
        assert_eq!(back, ev);
        assert_eq!(serde_json::to_string(&back).expect("encode"), json);
        let v: Value = serde_json::from_str(&json).expect("json");
        for m in mutations(&v, "type") {
            same_both_ways::<Event>(&m.to_string());
        }
    }
    // Lines of older builds and odd ones.
    for line in [
        r#"{"seq":1,"ts":"t","turn":0,"type":"session_started","workspace":"/w","system_hash":"a","tools_hash":"b"}"#,
        r#"{"type":"notice","text":"hi","seq":9,"turn":1,"ts":"t"}"#,
        r#"{"seq":1,"ts":"t","turn":0,"type":"approval_requested","approval_id":"ap-1-c1","tool":"bash","arguments":"{}","reason":"ask","preview":null}"#,
        r#"{"seq":1,"ts":"t","turn":0,"type":"subagent","call_id":"c","child":"sa-1","event":{"type":"text_delta","text":"x"}}"#,
        r#"{"seq":1,"ts":"t","turn":0,"type":"subagent","call_id":"c","child":"sa-1","event":{"type":"nope"}}"#,
        r#"{"seq":1,"ts":"t","turn":0}"#,
        r#"{"seq":"1","ts":"t","turn":0,"type":"notice","text":"x"}"#,
        r#"{"seq":1,"seq":2,"ts":"t","turn":0,"type":"notice","text":"x"}"#,
        r#"{"seq":1,"ts":"t","turn":0,"type":"notice","type":"notice","text":"x"}"#,
        r#"[1,"t",0]"#,
        "",
        "{",
    ] {
        same_both_ways::<Event>(line);
    }
}

/// serde's derived decoder took an integer tag as a variant's index when the enum was nested
/// in another tagged one (a journal line's `"type":7`, an envelope's `"m":7`) and refused it
/// at the top; now a tag is a variant's name, always.
#[test]
fn integer_tags_are_refused() {
    for json in [
        r#"{"t":"request","id":1,"body":{"m":0}}"#,
        r#"{"m":0}"#,
        r#"{"seq":1,"ts":"t","turn":0,"type":12,"text":"x"}"#,
    ] {
        assert!(serde_json::from_str::<Envelope>(json).is_err() || !json.contains("\"t\""));
        assert!(serde_json::from_str::<Request>(json).is_err());
        assert!(serde_json::from_str::<Event>(json).is_err());
    }
    let e = serde_json::from_str::<Request>(r#"{"m":0}"#).expect_err("refused");
    assert!(e.to_string().contains("expected variant identifier"), "{e}");
    assert_eq!(
        serde_json::from_str::<Request>(r#"{"m":"status"}"#).expect("decodes"),
        Request::Status
    );
}

/// Every JSON object inside the fuzz corpus's frames and link sessions (`fuzz/corpus/frame`,
/// `fuzz/corpus/link`): decoded as each protocol type, both decoders agree.
#[test]
fn fuzz_corpus_objects_decode_as_serde_derived_decoder_did() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    let (mut objects, mut accepted) = (0, 0);
    for dir in ["frame", "link"] {
        let entries = std::fs::read_dir(root.join(dir)).expect("fuzz corpus");
        for entry in entries {
            let data = std::fs::read(entry.expect("entry").path()).expect("read");
            for start in (0..data.len()).filter(|&i| data[i] == b'{') {
                let mut it =
                    serde_json::Deserializer::from_slice(&data[start..]).into_iter::<Value>();
                let Some(Ok(_)) = it.next() else { continue };
                let Ok(json) = std::str::from_utf8(&data[start..start + it.byte_offset()]) else {
                    continue;
                };
                objects += 1;
                let ok = [
                    same_both_ways::<Envelope>(json).is_some(),
                    same_both_ways::<Request>(json).is_some(),
                    same_both_ways::<Response>(json).is_some(),
                    same_both_ways::<Notification>(json).is_some(),
                    same_both_ways::<Event>(json).is_some(),
                    same_both_ways::<EventKind>(json).is_some(),
                    same_both_ways::<ProviderChunk>(json).is_some(),
                    same_both_ways::<crate::channel::ChannelMsg>(json).is_some(),
                ];
                accepted += ok.iter().filter(|b| **b).count();
            }
        }
    }
    // The corpus holds envelopes of every kind, not only noise.
    assert!(
        objects > 500 && accepted > 300,
        "{objects} objects, {accepted} decoded"
    );
}

/// Without the `client` feature (the host binary) the answers only a laptop receives are not
/// decoded: they are refused as unknown variants, the host's own answers still decode.
#[test]
#[cfg(not(feature = "client"))]
fn the_host_decodes_only_the_answers_to_its_own_requests() {
    for json in [
        r#"{"r":"ok"}"#,
        r#"{"r":"duplicate"}"#,
        r#"{"r":"sessions","sessions":[]}"#,
        r#"{"r":"mcp_token","access_token":null}"#,
    ] {
        let r: Response = serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"));
        assert_eq!(serde_json::to_string(&r).expect("encode"), json);
    }
    let e =
        serde_json::from_str::<Response>(r#"{"r":"history","entries":[]}"#).expect_err("refused");
    assert!(e.to_string().contains("unknown variant `history`"), "{e}");
}

/// Without the `client` feature (the host binary) no notification but `dropped` decodes: the
/// daemon reads none from a client. Encoding is unchanged.
#[test]
#[cfg(not(feature = "client"))]
fn the_host_decodes_no_notification_but_dropped() {
    let json = r#"{"n":"dropped","frames":2,"bytes":9}"#;
    let n: Notification = serde_json::from_str(json).expect("dropped decodes");
    assert_eq!(
        n,
        Notification::Dropped {
            frames: 2,
            bytes: 9
        }
    );
    for n in [
        Notification::State {
            state: crate::proto::TurnState::Idle,
            detail: None,
        },
        Notification::ToolProgress {
            call_id: "c".into(),
            message: "m".into(),
        },
        Notification::Ports { ports: vec![] },
        Notification::HookNotice { input: Value::Null },
    ] {
        let json = serde_json::to_string(&n).expect("encode");
        let e = serde_json::from_str::<Notification>(&json).expect_err("refused");
        assert!(e.to_string().contains("unknown variant"), "{json}: {e}");
    }
    assert_eq!(
        Notification::variants().len(),
        8,
        "a new notification: add it above"
    );
}
