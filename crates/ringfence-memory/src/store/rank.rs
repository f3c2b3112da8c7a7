//! How search results are ranked: the settings ([`RankConfig`]), the fused relevance of a
//! candidate and its floors, and the boosts for recent and often used rows.

/// Ranking and duplicate detection settings (`[memory.search]` in the config).
#[derive(Debug, Clone, PartialEq)]
pub struct RankConfig {
    /// Weight of matching words (weighted coverage, 0..1) added to the similarity of
    /// meanings. Default 0.15: on the development part of the conversation bench
    /// (`bench/memory_conv`) 0.25 found a question in a hundred more, but on the project's
    /// own set crowded by 10,000 rows that share its words it lost one in twenty.
    pub lexical_weight: f32,
    /// Added to the relevance of a row stored within a time the question names ("in May
    /// 2023", "on 8 May, 2023", "last week"). Default 0.2, the smallest weight at the best
    /// score on the development part of the conversation bench (`bench/memory_conv`).
    pub time_weight: f32,
    /// Boost for recently stored or updated rows, at most this fraction. Default 0.05.
    pub recency_weight: f32,
    /// Boost for rows often returned by searches, at most this fraction. Default 0.05.
    pub usage_weight: f32,
    /// Age at which the recency boost halves. Default 90 days.
    pub recency_half_life_days: f32,
    /// Rows whose relevance is below this, or whose similarity is below half of it, are not
    /// returned. Default 0.22 (all-MiniLM-L6-v2 puts unrelated sentences at 0.0–0.2 and
    /// most paraphrases above 0.3).
    pub min_relevance: f32,
    /// With words only (no model), rows whose word score is below this are not returned.
    /// Default 0.2 (roughly: at least one word that is not in most rows).
    pub min_lexical: f32,
    /// A new row whose meaning is at least this similar to an existing one, stating the
    /// same numbers, is a duplicate. Default 0.9 (all-MiniLM-L6-v2 scores restatements such
    /// as "User is allergic to shellfish" / "The user has a shellfish allergy" 0.91–0.94,
    /// and different facts of the same form — sister/brother, likes/dislikes — 0.83–0.87).
    pub duplicate_threshold: f32,
}

impl Default for RankConfig {
    fn default() -> Self {
        RankConfig {
            lexical_weight: 0.15,
            time_weight: 0.2,
            recency_weight: 0.05,
            usage_weight: 0.05,
            recency_half_life_days: 90.0,
            min_relevance: 0.22,
            min_lexical: 0.2,
            duplicate_threshold: 0.9,
        }
    }
}

impl RankConfig {
    /// A candidate's relevance, or `None` when it falls below the floor. By meaning
    /// (`hybrid`): `similarity + lexical_weight · words`, floored at `min_relevance`, and a
    /// row less than half of that similar is dropped whatever its words (words alone never
    /// carry a row whose meaning is far from the question). By words only: `words`, floored
    /// at `min_lexical`. Either way, a row stored within a time the question names
    /// (`in_time`) gains `time_weight` once it is past the floor.
    pub(super) fn relevance(
        &self,
        hybrid: bool,
        similarity: Option<f32>,
        words: f32,
        in_time: bool,
    ) -> Option<f32> {
        let relevance = if hybrid {
            similarity.unwrap_or(0.0).max(0.0) + self.lexical_weight * words
        } else {
            words
        };
        let floor = if hybrid {
            self.min_relevance
        } else {
            self.min_lexical
        };
        let far = hybrid && similarity.unwrap_or(0.0) < self.min_relevance / 2.0;
        if relevance < floor || far {
            None
        } else if in_time {
            Some(relevance + self.time_weight)
        } else {
            Some(relevance)
        }
    }

    /// `relevance` boosted by recency (halving every `recency_half_life_days` since the
    /// row's last update) and usage (the log of how often searches returned it, full at
    /// 20 uses).
    pub(super) fn score(
        &self,
        relevance: f32,
        updated_ms: i64,
        access_count: i64,
        now_ms: i64,
    ) -> f32 {
        let age_days = ((now_ms - updated_ms).max(0) as f32) / 86_400_000.0;
        let recency = 0.5f32.powf(age_days / self.recency_half_life_days.max(0.001));
        let usage = ((1 + access_count.max(0)) as f32).ln() / 21f32.ln();
        relevance * (1.0 + self.recency_weight * recency + self.usage_weight * usage.min(1.0))
    }
}
