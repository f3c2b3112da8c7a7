//! The memory database with a small deterministic embedder (bag of words hashed into 256
//! dimensions): the same words in any order mean "the same", shared words mean "similar".
//! The real model is tested in tests/memory_quality.rs.

use std::sync::Arc;

use crate::{Kind, MemoryBackend, NewItem, Query, SearchMode, StoreOutcome, UpdateOutcome};
use ringfence_embed::{EmbedError, Embedder, normalize};

use super::{MemoryDb, RankConfig};

#[derive(Debug)]
struct Words;

impl Embedder for Words {
    fn id(&self) -> &str {
        "test:words"
    }
    fn dims(&self) -> usize {
        256
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; 256];
                for w in t.to_lowercase().split(|c: char| !c.is_alphanumeric()) {
                    if !w.is_empty() {
                        let h = blake3::hash(w.as_bytes());
                        v[u16::from_le_bytes([h.as_bytes()[0], h.as_bytes()[1]]) as usize % 256] +=
                            1.0;
                    }
                }
                normalize(&mut v);
                v
            })
            .collect())
    }
}

/// Where a test's rows live: a SQLite file or a PostgreSQL database.
trait Bed {
    /// A handle on the test's store (each call another, as another process would open).
    fn open_with(&self, loader: Option<super::EmbedderLoader>) -> Arc<MemoryDb>;
    /// Another, empty store (and what keeps it alive).
    fn another(&self) -> Box<dyn Bed>;
}

struct SqliteBed(tempfile::TempDir);

impl Bed for SqliteBed {
    fn open_with(&self, loader: Option<super::EmbedderLoader>) -> Arc<MemoryDb> {
        MemoryDb::open(
            &self.0.path().join("memory.db"),
            loader,
            RankConfig::default(),
        )
        .unwrap()
    }
    fn another(&self) -> Box<dyn Bed> {
        Box::new(SqliteBed(tempfile::tempdir().unwrap()))
    }
}

struct PgBed(ringfence_store::pg::scratch::ScratchDb);

impl Bed for PgBed {
    fn open_with(&self, loader: Option<super::EmbedderLoader>) -> Arc<MemoryDb> {
        MemoryDb::open_postgres(self.0.connect(), loader, RankConfig::default()).unwrap()
    }
    fn another(&self) -> Box<dyn Bed> {
        Box::new(PgBed(
            ringfence_store::pg::scratch::ScratchDb::new().expect("a test cluster"),
        ))
    }
}

fn open(t: &dyn Bed, embedder: bool) -> Arc<MemoryDb> {
    t.open_with(if embedder {
        Some(Box::new(|| Ok(Arc::new(Words) as Arc<dyn Embedder>)))
    } else {
        None
    })
}

ringfence_store::on_both_beds!(
    ids_count_per_user_and_kind_and_survive_reopen,
    one_user_never_reaches_another_users_rows,
    duplicates_by_text_or_meaning_are_not_stored_twice,
    update_replaces_content_and_vector,
    deleting_a_truth_promotes_nothing,
    filters_unrelated_rows_and_pinned_truths,
    without_a_model_search_is_by_words_and_says_so,
    changes_by_another_process_are_seen,
    concurrent_stores_lose_nothing_and_number_uniquely,
    export_then_import_round_trips_with_vectors,
    search_counts_accesses,
    bulk_import_skips_stored_text_and_is_searchable_at_once,
    words_only_search_applies_type_category_and_tag_filters,
    an_embedder_that_fails_leaves_stores_working_and_search_to_words,
    words_of_users_with_similar_names_stay_apart,
    pinning_and_clearing_touch_one_user_only,
    a_time_the_question_names_brings_up_what_was_stored_then,
    a_new_model_embeds_the_rows_again_in_the_background_while_search_uses_words,
    embedding_again_runs_one_job_at_a_time_and_a_failed_one_says_so,
);

fn memory(content: &str) -> NewItem {
    NewItem {
        content: content.into(),
        category: None,
        memory_type: None,
        tags: Vec::new(),
        pinned: false,
        source: "conversation".into(),
    }
}

fn query(text: &str) -> Query {
    Query {
        text: text.into(),
        limit: 5,
        memory_type: None,
        category: None,
        tags: Vec::new(),
    }
}

fn stored(outcome: StoreOutcome) -> i64 {
    match outcome {
        StoreOutcome::Stored(item) => item.id,
        StoreOutcome::Duplicate(d) => panic!("unexpected duplicate of #{}", d.existing.id),
    }
}

fn found(db: &MemoryDb, user: &str, kind: Kind, q: &str) -> Vec<i64> {
    db.search(user, kind, &query(q))
        .unwrap()
        .hits
        .iter()
        .map(|h| h.item.id)
        .collect()
}

fn ids_count_per_user_and_kind_and_survive_reopen(t: &dyn Bed) {
    {
        let db = open(t, true);
        assert_eq!(
            stored(
                db.store("ann", Kind::Truth, memory("Ann is a pilot"))
                    .unwrap()
            ),
            1
        );
        assert_eq!(
            stored(
                db.store("ann", Kind::Truth, memory("Ann lives in Oslo"))
                    .unwrap()
            ),
            2
        );
        assert_eq!(
            stored(
                db.store("ann", Kind::Memory, memory("Ann likes figs"))
                    .unwrap()
            ),
            1
        );
        assert_eq!(
            stored(
                db.store("bob", Kind::Truth, memory("Bob is a baker"))
                    .unwrap()
            ),
            1
        );
        // A deleted number is never handed out again.
        db.delete("ann", Kind::Truth, 2).unwrap().unwrap();
        assert_eq!(
            stored(
                db.store("ann", Kind::Truth, memory("Ann owns a cat"))
                    .unwrap()
            ),
            3
        );
    }
    let db = open(t, true);
    assert_eq!(found(&db, "ann", Kind::Truth, "pilot")[0], 1);
    assert_eq!(found(&db, "ann", Kind::Truth, "cat")[0], 3);
    assert!(!found(&db, "ann", Kind::Truth, "Oslo").contains(&2));
}

fn one_user_never_reaches_another_users_rows(t: &dyn Bed) {
    let db = open(t, true);
    stored(
        db.store("ann", Kind::Memory, memory("Ann's locker code is 4711"))
            .unwrap(),
    );
    assert!(found(&db, "bob", Kind::Memory, "locker code 4711").is_empty());
    assert_eq!(
        db.update("bob", Kind::Memory, 1, "hacked").unwrap(),
        UpdateOutcome::NotFound
    );
    assert_eq!(db.delete("bob", Kind::Memory, 1).unwrap(), None);
    // The same text for another user is not a duplicate of Ann's.
    stored(
        db.store("bob", Kind::Memory, memory("Ann's locker code is 4711"))
            .unwrap(),
    );
    assert_eq!(found(&db, "ann", Kind::Memory, "locker code 4711"), vec![1]);
    assert_eq!(db.export(Some("bob"), None, false).unwrap().len(), 1);
}

fn duplicates_by_text_or_meaning_are_not_stored_twice(t: &dyn Bed) {
    let db = open(t, true);
    let id = stored(
        db.store("u", Kind::Memory, memory("User is allergic to shellfish"))
            .unwrap(),
    );
    match db
        .store(
            "u",
            Kind::Memory,
            memory("  user is ALLERGIC to shellfish. "),
        )
        .unwrap()
    {
        StoreOutcome::Duplicate(d) => {
            assert!(d.exact);
            assert_eq!(d.existing.id, id);
        }
        other => panic!("{other:?}"),
    }
    // Same words in another order: the test embedder gives the same vector.
    match db
        .store("u", Kind::Memory, memory("shellfish: user is allergic to"))
        .unwrap()
    {
        StoreOutcome::Duplicate(d) => {
            assert!(!d.exact);
            assert!(d.similarity > 0.99, "{}", d.similarity);
        }
        other => panic!("{other:?}"),
    }
    // Truths and memories are separate: the same fact may be both.
    stored(
        db.store("u", Kind::Truth, memory("User is allergic to shellfish"))
            .unwrap(),
    );
    assert_eq!(db.export(Some("u"), None, false).unwrap().len(), 2);
}

fn update_replaces_content_and_vector(t: &dyn Bed) {
    let db = open(t, true);
    stored(
        db.store("u", Kind::Memory, memory("User lives in Seattle"))
            .unwrap(),
    );
    stored(
        db.store("u", Kind::Memory, memory("User drives a blue bicycle"))
            .unwrap(),
    );
    match db
        .update("u", Kind::Memory, 1, "User lives in Chicago now")
        .unwrap()
    {
        UpdateOutcome::Updated { before, after } => {
            assert_eq!(before.content, "User lives in Seattle");
            assert_eq!(after.content, "User lives in Chicago now");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(found(&db, "u", Kind::Memory, "Chicago"), vec![1]);
    assert!(found(&db, "u", Kind::Memory, "Seattle").is_empty());
    // Updating into another row's exact text is refused, nothing changes.
    match db
        .update("u", Kind::Memory, 1, "user drives a blue bicycle")
        .unwrap()
    {
        UpdateOutcome::Duplicate(d) => assert_eq!(d.existing.id, 2),
        other => panic!("{other:?}"),
    }
    assert_eq!(found(&db, "u", Kind::Memory, "Chicago"), vec![1]);
}

fn deleting_a_truth_promotes_nothing(t: &dyn Bed) {
    let db = open(t, true);
    stored(
        db.store("u", Kind::Truth, memory("User works as a nurse"))
            .unwrap(),
    );
    stored(
        db.store("u", Kind::Memory, memory("User works as a nurse at night"))
            .unwrap(),
    );
    assert!(db.delete("u", Kind::Truth, 1).unwrap().is_some());
    assert!(found(&db, "u", Kind::Truth, "nurse").is_empty());
    assert_eq!(found(&db, "u", Kind::Memory, "nurse"), vec![1]);
    assert_eq!(db.delete("u", Kind::Truth, 1).unwrap(), None);
}

/// Two memories of `user` sharing the word "runs": #1 a habit (hobbies; sport, running),
/// #2 a fact (professional; work).
fn store_runner_and_baker(db: &MemoryDb, user: &str) {
    let mut m = memory("User runs marathons every spring");
    m.memory_type = Some("habit".into());
    m.category = Some("hobbies".into());
    m.tags = vec!["sport".into(), "running".into()];
    assert_eq!(stored(db.store(user, Kind::Memory, m).unwrap()), 1);
    let mut m = memory("User runs a small bakery business");
    m.memory_type = Some("fact".into());
    m.category = Some("professional".into());
    m.tags = vec!["work".into()];
    assert_eq!(stored(db.store(user, Kind::Memory, m).unwrap()), 2);
}

fn filters_unrelated_rows_and_pinned_truths(t: &dyn Bed) {
    let db = open(t, true);
    store_runner_and_baker(&db, "u");
    let mut q = query("runs");
    q.memory_type = Some("habit".into());
    assert_eq!(db.search("u", Kind::Memory, &q).unwrap().hits.len(), 1);
    q.memory_type = None;
    q.tags = vec!["running".into()];
    assert_eq!(db.search("u", Kind::Memory, &q).unwrap().hits[0].item.id, 1);
    q.tags.clear();
    q.category = Some("professional".into());
    assert_eq!(db.search("u", Kind::Memory, &q).unwrap().hits[0].item.id, 2);
    // Nothing shares a word with this: nothing comes back.
    assert!(found(&db, "u", Kind::Memory, "quantum chromodynamics lecture").is_empty());

    let mut t = memory("User's name is Robin");
    t.pinned = true;
    stored(db.store("u", Kind::Truth, t).unwrap());
    stored(
        db.store("u", Kind::Truth, memory("User is left-handed"))
            .unwrap(),
    );
    let pinned = db.pinned("u").unwrap();
    assert_eq!(pinned.len(), 1);
    assert_eq!(pinned[0].content, "User's name is Robin");
    assert!(db.pinned("other").unwrap().is_empty());
}

fn without_a_model_search_is_by_words_and_says_so(t: &dyn Bed) {
    let db = open(t, false);
    stored(
        db.store("u", Kind::Memory, memory("User is allergic to shellfish"))
            .unwrap(),
    );
    let out = db
        .search("u", Kind::Memory, &query("shellfish allergy"))
        .unwrap();
    assert_eq!(out.hits.len(), 1);
    match out.mode {
        SearchMode::Lexical { reason } => {
            assert!(reason.contains("ringfence model install"), "{reason}")
        }
        SearchMode::Hybrid => panic!("no model, yet hybrid"),
    }
    assert!(found(&db, "u", Kind::Memory, "seafood").is_empty());
    drop(db);
    // Rows stored without a model get vectors when a model is there.
    let db = open(t, true);
    let out = db
        .search("u", Kind::Memory, &query("shellfish to allergic is user"))
        .unwrap();
    assert_eq!(out.mode, SearchMode::Hybrid);
    assert!(out.hits[0].similarity.unwrap() > 0.9);
}

fn changes_by_another_process_are_seen(t: &dyn Bed) {
    let a = open(t, true);
    let b = open(t, true);
    stored(
        a.store("u", Kind::Memory, memory("User plays the oboe"))
            .unwrap(),
    );
    assert_eq!(found(&a, "u", Kind::Memory, "oboe"), vec![1]);
    stored(
        b.store("u", Kind::Memory, memory("User collects stamps"))
            .unwrap(),
    );
    b.delete("u", Kind::Memory, 1).unwrap().unwrap();
    assert_eq!(found(&a, "u", Kind::Memory, "stamps collects"), vec![2]);
    assert!(found(&a, "u", Kind::Memory, "oboe").is_empty());
    // `a`'s vector index took in `b`'s row: the same words in another order (another text,
    // the same meaning) are refused as its duplicate, which only the index can tell.
    let duplicate_of =
        |db: &MemoryDb, text: &str| match db.store("u", Kind::Memory, memory(text)).unwrap() {
            StoreOutcome::Duplicate(d) => Some(d.existing.id),
            StoreOutcome::Stored(_) => None,
        };
    assert_eq!(duplicate_of(&a, "Stamps user collects"), Some(2));
    // An update through `b` moves the row in `a`'s index too.
    assert!(matches!(
        b.update("u", Kind::Memory, 2, "User breeds goats").unwrap(),
        UpdateOutcome::Updated { .. }
    ));
    assert_eq!(duplicate_of(&a, "goats user breeds"), Some(2));
    assert_eq!(duplicate_of(&a, "Stamps user collects"), None);
}

fn concurrent_stores_lose_nothing_and_number_uniquely(t: &dyn Bed) {
    let db = open(t, true);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut ids = Vec::new();
                for i in 0..40 {
                    let text = format!("a{t}x{i} b{t}x{i} c{t}x{i} d{t}x{i}");
                    ids.push(stored(db.store("u", Kind::Memory, memory(&text)).unwrap()));
                    // The same text from every thread at once: stored exactly once.
                    let _ = db
                        .store(
                            "u",
                            Kind::Truth,
                            memory(&format!("s{i}a s{i}b s{i}c s{i}d")),
                        )
                        .unwrap();
                }
                ids
            })
        })
        .collect();
    let mut all: Vec<i64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    all.sort_unstable();
    assert_eq!(all, (1..=320).collect::<Vec<_>>());
    let exported = db.export(Some("u"), None, false).unwrap();
    assert_eq!(exported.iter().filter(|r| r.kind == "memory").count(), 320);
    assert_eq!(exported.iter().filter(|r| r.kind == "truth").count(), 40);
}

fn export_then_import_round_trips_with_vectors(t: &dyn Bed) {
    let db = open(t, true);
    let mut m = memory("User prefers tea over coffee");
    m.memory_type = Some("preference".into());
    m.tags = vec!["drinks".into()];
    stored(db.store("u", Kind::Memory, m).unwrap());
    let mut truth = memory("User is called Sam");
    truth.pinned = true;
    stored(db.store("u", Kind::Truth, truth).unwrap());
    let records = db.export(Some("u"), None, true).unwrap();
    assert!(records.iter().all(|r| r.embedding.is_some()));

    let other = t.another();
    let db2 = open(other.as_ref(), true);
    for r in records.clone() {
        assert!(matches!(
            db2.import(r, Some("v")).unwrap(),
            StoreOutcome::Stored(_)
        ));
    }
    // Importing again stores nothing new.
    for r in records.clone() {
        assert!(matches!(
            db2.import(r, Some("v")).unwrap(),
            StoreOutcome::Duplicate(_)
        ));
    }
    let back = db2.export(Some("v"), None, true).unwrap();
    assert_eq!(back.len(), 2);
    for (a, b) in records.iter().zip(&back) {
        assert_eq!(
            (&a.kind, &a.content, &a.tags, &a.is_pinned),
            (&b.kind, &b.content, &b.tags, &b.is_pinned)
        );
        assert_eq!(
            (&a.created, &a.updated, &a.embedding),
            (&b.created, &b.updated, &b.embedding)
        );
        assert_eq!(b.user.as_deref(), Some("v"));
    }
    assert_eq!(db2.pinned("v").unwrap().len(), 1);
    // Bad records are refused with the reason.
    let mut bad = records[0].clone();
    bad.kind = "note".into();
    assert!(
        db2.import(bad, None)
            .unwrap_err()
            .to_string()
            .contains("neither")
    );
    let mut bad = records.iter().find(|r| r.kind == "memory").unwrap().clone();
    bad.memory_type = Some("rumour".into());
    assert!(
        db2.import(bad, Some("v"))
            .unwrap_err()
            .to_string()
            .contains("memoryType")
    );
}

fn search_counts_accesses(t: &dyn Bed) {
    let db = open(t, true);
    stored(
        db.store("u", Kind::Memory, memory("User swims at dawn"))
            .unwrap(),
    );
    for _ in 0..3 {
        assert_eq!(found(&db, "u", Kind::Memory, "swims dawn"), vec![1]);
    }
    db.flush();
    let r = db.export(Some("u"), None, false).unwrap();
    assert_eq!(r[0].access_count, Some(3));
}

fn bulk_import_skips_stored_text_and_is_searchable_at_once(t: &dyn Bed) {
    let db = open(t, true);
    stored(
        db.store("u", Kind::Memory, memory("User grows tomatoes"))
            .unwrap(),
    );
    // Build the index first, so the import must invalidate it.
    assert_eq!(found(&db, "u", Kind::Memory, "tomatoes"), vec![1]);
    let rows: Vec<super::Prepared> = [
        "user grows tomatoes.",
        "User keeps bees",
        "User sails dinghies",
    ]
    .iter()
    .map(|c| {
        super::Prepared::from_record(
            super::ExportRecord {
                user: None,
                kind: "memory".into(),
                id: None,
                content: (*c).into(),
                category: None,
                memory_type: None,
                tags: None,
                is_pinned: None,
                source: None,
                created: Some("2025-01-02T03:04:05Z".into()),
                updated: None,
                access_count: None,
                embedding: None,
            },
            Some("u"),
        )
        .unwrap()
    })
    .collect();
    let mut calls = 0;
    let report = db.import_many(rows, &mut |_, _| calls += 1).unwrap();
    assert_eq!((report.stored, report.duplicates), (2, 1));
    assert!(calls > 0);
    assert_eq!(found(&db, "u", Kind::Memory, "bees")[0], 2);
    assert_eq!(found(&db, "u", Kind::Memory, "dinghies sails")[0], 3);
    let r = db.export(Some("u"), None, false).unwrap();
    assert_eq!(r[1].created.as_deref(), Some("2025-01-02T03:04:05.000Z"));
    assert_eq!(r[1].source.as_deref(), Some("import"));
}

fn words_only_search_applies_type_category_and_tag_filters(t: &dyn Bed) {
    let db = open(t, false);
    store_runner_and_baker(&db, "u");
    // Another user's row with the same words and labels is never a candidate.
    let mut m = memory("Someone else runs marathons and a bakery");
    m.memory_type = Some("habit".into());
    m.category = Some("professional".into());
    m.tags = vec!["running".into(), "work".into()];
    stored(db.store("other", Kind::Memory, m).unwrap());

    let ids = |q: &Query| -> Vec<i64> {
        let out = db.search("u", Kind::Memory, q).unwrap();
        assert!(matches!(out.mode, SearchMode::Lexical { .. }));
        let mut ids: Vec<i64> = out.hits.iter().map(|h| h.item.id).collect();
        ids.sort_unstable();
        ids
    };
    let mut q = query("runs marathons bakery");
    assert_eq!(ids(&q), vec![1, 2]);
    q.memory_type = Some("habit".into());
    assert_eq!(ids(&q), vec![1]);
    q.memory_type = None;
    q.category = Some("professional".into());
    assert_eq!(ids(&q), vec![2]);
    q.category = None;
    q.tags = vec!["work".into(), "nothing".into()];
    assert_eq!(ids(&q), vec![2]);
    q.tags = vec!["nothing".into()];
    assert!(ids(&q).is_empty());
}

/// An endpoint that is down: it loads, and every embedding fails.
#[derive(Debug)]
struct Down;

impl Embedder for Down {
    fn id(&self) -> &str {
        "test:down"
    }
    fn dims(&self) -> usize {
        256
    }
    fn embed(&self, _texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Err(EmbedError::Provider("connection refused".into()))
    }
}

fn an_embedder_that_fails_leaves_stores_working_and_search_to_words(t: &dyn Bed) {
    let loader: super::EmbedderLoader = Box::new(|| Ok(Arc::new(Down) as Arc<dyn Embedder>));
    let db = t.open_with(Some(loader));
    store_runner_and_baker(&db, "u");
    // The first search must build the index, which embeds the stored rows: that fails too,
    // and the search answers by words, saying why.
    let out = db.search("u", Kind::Memory, &query("bakery")).unwrap();
    match &out.mode {
        SearchMode::Lexical { reason } => {
            assert!(reason.contains("connection refused"), "{reason}")
        }
        SearchMode::Hybrid => panic!("hybrid without vectors"),
    }
    assert_eq!(
        out.hits.iter().map(|h| h.item.id).collect::<Vec<_>>(),
        vec![2]
    );
}

fn words_of_users_with_similar_names_stay_apart(t: &dyn Bed) {
    let db = open(t, false);
    // Names that differ by case, by a suffix, or that contain the separator characters
    // of the full-text index's owner token.
    let users = ["ann", "ANN", "ann2", "ann 1", "an", "ännchen", "u616e6e2"];
    for u in users {
        stored(
            db.store(
                u,
                Kind::Memory,
                memory(&format!("{u} keeps bees on the roof")),
            )
            .unwrap(),
        );
    }
    stored(
        db.store("ann", Kind::Truth, memory("ann keeps bees as a hobby"))
            .unwrap(),
    );
    for u in users {
        let hits = db
            .search(u, Kind::Memory, &query("bees roof"))
            .unwrap()
            .hits;
        assert_eq!(hits.len(), 1, "{u}");
        assert_eq!(hits[0].item.content, format!("{u} keeps bees on the roof"));
    }
    let truths = db.search("ann", Kind::Truth, &query("bees")).unwrap().hits;
    assert_eq!(truths.len(), 1);
    assert!(truths[0].item.content.contains("hobby"));
    // After an update and a delete, the index follows.
    db.update("ANN", Kind::Memory, 1, "ANN keeps wasps in the shed")
        .unwrap();
    assert!(
        db.search("ANN", Kind::Memory, &query("bees"))
            .unwrap()
            .hits
            .is_empty()
    );
    assert_eq!(
        db.search("ANN", Kind::Memory, &query("wasps"))
            .unwrap()
            .hits
            .len(),
        1
    );
    db.delete("ann2", Kind::Memory, 1).unwrap();
    assert!(
        db.search("ann2", Kind::Memory, &query("bees"))
            .unwrap()
            .hits
            .is_empty()
    );
    assert_eq!(
        db.search("ann", Kind::Memory, &query("bees"))
            .unwrap()
            .hits
            .len(),
        1
    );
}

fn pinning_and_clearing_touch_one_user_only(t: &dyn Bed) {
    let db = open(t, true);
    stored(
        db.store("u", Kind::Truth, memory("User is vegetarian"))
            .unwrap(),
    );
    stored(
        db.store("u", Kind::Memory, memory("User visited Lisbon"))
            .unwrap(),
    );
    stored(
        db.store("v", Kind::Truth, memory("User is vegetarian"))
            .unwrap(),
    );
    let pinned = db.set_pinned("u", 1, true).unwrap().expect("truth 1");
    assert!(pinned.pinned && pinned.content == "User is vegetarian");
    assert_eq!(db.pinned("u").unwrap().len(), 1);
    assert!(
        db.pinned("v").unwrap().is_empty(),
        "another user's truth stays unpinned"
    );
    // Another user's number, or a memory's, is no truth of this user.
    assert!(db.set_pinned("w", 1, true).unwrap().is_none());
    assert!(db.set_pinned("u", 9, true).unwrap().is_none());
    assert!(!db.set_pinned("u", 1, false).unwrap().unwrap().pinned);
    assert_eq!(
        db.get("u", Kind::Memory, 1).unwrap().unwrap().content,
        "User visited Lisbon"
    );
    assert_eq!(db.clear("u", Some(Kind::Memory)).unwrap(), 1);
    assert!(db.get("u", Kind::Memory, 1).unwrap().is_none());
    assert!(
        found(&db, "u", Kind::Memory, "Lisbon").is_empty(),
        "gone from the index too"
    );
    assert_eq!(db.clear("u", None).unwrap(), 1);
    assert!(db.get("u", Kind::Truth, 1).unwrap().is_none());
    assert_eq!(
        db.get("v", Kind::Truth, 1).unwrap().unwrap().content,
        "User is vegetarian"
    );
}

/// A question naming a date finds the row stored then, among a hundred and fifty rows of the
/// same shape (more than the candidates taken by meaning alone), some of them closer to the
/// question's words by a chance collision in the test embedder.
fn a_time_the_question_names_brings_up_what_was_stored_then(t: &dyn Bed) {
    const DAY: i64 = 86_400_000;
    let jan_2024 = 1_704_067_200_000; // 2024-01-01
    let may_8_2023 = 1_683_504_000_000; // 2023-05-08
    let db = open(t, true);
    for i in 0..150 {
        let at = jan_2024 + i * DAY;
        db.store_with(
            "u",
            Kind::Memory,
            memory(&format!(
                "User went hiking in the hills with a friend from work, trip {i}"
            )),
            Some((at, at, 0)),
            None,
        )
        .unwrap();
    }
    let then = stored(
        db.store_with(
            "u",
            Kind::Memory,
            memory("User went hiking in the hills with a friend from work, trip 999"),
            Some((may_8_2023, may_8_2023, 0)),
            None,
        )
        .unwrap(),
    );
    for q in [
        "Which friend from work did the user go hiking in the hills with in May 2023?",
        "Which friend from work did the user go hiking in the hills with on 8 May, 2023?",
        "Which friend from work did the user go hiking in the hills with on 2023-05-10?",
    ] {
        assert_eq!(found(&db, "u", Kind::Memory, q).first(), Some(&then), "{q}");
    }
    for q in [
        "Which friend from work did the user go hiking in the hills with in June 2024?",
        "Which friend from work did the user go hiking in the hills with?",
    ] {
        assert_ne!(found(&db, "u", Kind::Memory, q).first(), Some(&then), "{q}");
    }
}

/// The test embedder under another model's name, whose batches (the background work) wait
/// until the test opens the gate; single texts (a question, a new row) pass at once.
#[derive(Debug)]
struct Gated(Gate);

impl Embedder for Gated {
    fn id(&self) -> &str {
        "test:words-v2"
    }
    fn dims(&self) -> usize {
        256
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.len() > 1 {
            let (open, opened) = &*self.0;
            let mut open = open.lock().unwrap();
            while !*open {
                open = opened.wait(open).unwrap();
            }
        }
        Words.embed(texts)
    }
}

type Gate = Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>;

/// `rows` memories for each of `users`, embedded by the test model; the database closed.
fn stored_by_the_old_model(
    t: &dyn Bed,
    users: &[&str],
    rows: usize,
    text: impl Fn(usize) -> String,
) {
    let db = open(t, true);
    for user in users {
        for i in 0..rows {
            stored(db.store(user, Kind::Memory, memory(&text(i))).unwrap());
        }
    }
}

/// The store opened again with [`Gated`] (another model), and its gate, shut.
fn reopened_with_a_gated_model(t: &dyn Bed) -> (Arc<MemoryDb>, Gate) {
    let gate: Gate = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let loader_gate = gate.clone();
    let db = t.open_with(Some(Box::new(move || {
        Ok(Arc::new(Gated(loader_gate.clone())) as Arc<dyn Embedder>)
    })));
    (db, gate)
}

/// Lets [`Gated`]'s batches through from now on.
fn open_the_gate(gate: &Gate) {
    let (open, opened) = &**gate;
    *open.lock().unwrap() = true;
    opened.notify_all();
}

/// Rows embedded by one model, searched after the model changed: their vectors are made
/// again in the background, search meanwhile matches words and says so (never comparing
/// the question with the old model's vectors), a store meanwhile succeeds, and once done
/// every row has the new model's vector and search is by meaning again.
fn a_new_model_embeds_the_rows_again_in_the_background_while_search_uses_words(t: &dyn Bed) {
    let rows = super::reembed::ON_THE_SPOT + 44;
    stored_by_the_old_model(t, &["u"], rows, |i| {
        format!("User planted tree number {i} in the garden")
    });
    let (db, gate) = reopened_with_a_gated_model(t);
    let out = db
        .search("u", Kind::Memory, &query("tree number 7 in the garden"))
        .unwrap();
    match &out.mode {
        SearchMode::Lexical { reason } => {
            assert!(
                reason.contains(&format!("0 of {rows}")) && reason.contains("test:words-v2"),
                "{reason}"
            );
        }
        other => panic!("expected words only while embedding again, got {other:?}"),
    }
    assert!(!out.hits.is_empty(), "words still find rows");
    assert!(out.hits.iter().all(|h| h.similarity.is_none()));
    // Another user is not held up.
    stored(
        db.store("w", Kind::Memory, memory("User likes figs"))
            .unwrap(),
    );
    let other = db.search("w", Kind::Memory, &query("figs")).unwrap();
    assert!(matches!(other.mode, SearchMode::Hybrid));
    // A store meanwhile is embedded by the new model at once.
    let oak = stored(
        db.store("u", Kind::Memory, memory("User planted an oak by the pond"))
            .unwrap(),
    );
    open_the_gate(&gate);
    db.finish_reembedding();
    assert!(
        db.rows
            .missing_vectors("u", Kind::Memory, "test:words-v2")
            .unwrap()
            .is_empty(),
        "every row has the new model's vector"
    );
    let out = db
        .search("u", Kind::Memory, &query("oak by the pond"))
        .unwrap();
    assert!(matches!(out.mode, SearchMode::Hybrid), "{:?}", out.mode);
    assert_eq!(out.hits.first().map(|h| h.item.id), Some(oak));
    assert!(out.hits.iter().all(|h| h.similarity.is_some()));
}

/// The test embedder under another model's name, failing every batch (the background work).
#[derive(Debug)]
struct FailingBatches;

impl Embedder for FailingBatches {
    fn id(&self) -> &str {
        "test:words-v3"
    }
    fn dims(&self) -> usize {
        256
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.len() > 1 {
            return Err(EmbedError::Model("the endpoint is down".into()));
        }
        Words.embed(texts)
    }
}

/// Two users' rows need a new model's vectors: one job runs, the other user's searches say
/// they wait (words meanwhile) and theirs starts after. A job that fails says so on the
/// searches after it, and is not started again at once.
fn embedding_again_runs_one_job_at_a_time_and_a_failed_one_says_so(t: &dyn Bed) {
    let rows = super::reembed::ON_THE_SPOT + 10;
    stored_by_the_old_model(t, &["u", "w"], rows, |i| {
        format!("User painted picture number {i} of the sea")
    });
    let (db, gate) = reopened_with_a_gated_model(t);
    let reason = |db: &MemoryDb, user: &str| match db
        .search(user, Kind::Memory, &query("picture of the sea"))
        .unwrap()
        .mode
    {
        SearchMode::Lexical { reason } => reason,
        SearchMode::Hybrid => "hybrid".into(),
    };
    assert!(reason(&db, "u").contains(&format!("0 of {rows}")));
    // u's job holds the worker: w waits, by words.
    assert!(reason(&db, "w").contains(&format!("0 of {rows}")));
    open_the_gate(&gate);
    db.finish_reembedding();
    assert_eq!(reason(&db, "u"), "hybrid");
    assert!(
        db.rows
            .missing_vectors("w", Kind::Memory, "test:words-v2")
            .unwrap()
            .len()
            == rows,
        "w's rows waited for u's job"
    );
    // w's next search starts w's job.
    assert!(reason(&db, "w").contains("of"));
    db.finish_reembedding();
    assert_eq!(reason(&db, "w"), "hybrid");
    drop(db);

    // An embedder whose batches fail: the job stops, and says so.
    let db = t.open_with(Some(Box::new(|| {
        Ok(Arc::new(FailingBatches) as Arc<dyn Embedder>)
    })));
    db.retry_failed_after(24 * 3600);
    assert!(reason(&db, "u").contains(&format!("0 of {rows}")));
    db.finish_reembedding();
    let why = reason(&db, "u");
    assert!(
        why.contains("failed") && why.contains("the endpoint is down"),
        "{why}"
    );
    // Stores go on meanwhile.
    stored(
        db.store("u", Kind::Memory, memory("User sailed to the island"))
            .unwrap(),
    );
}
