//! Building a draft tree from the MTP head's logits.
//!
//! Candidates are scored by cumulative log-probability under the head: a child's
//! score is its parent's plus `log p_head(child | path)`, so a path's score is the log
//! of the head's probability of the whole path, the chance (if the head were the
//! target) that verification accepts it. Each expanded node proposes its `top_k`
//! most likely tokens; of the candidates at a depth, the `top_k` best are expanded
//! further (the head runs once per expanded node). At the end the best `nodes − 1`
//! candidates of every depth form the tree with the root. A child never scores above
//! its parent, so the best-scoring set is closed under ancestors (ties go to the
//! shallower, earlier candidate).

use edge_model::TopLogits;

/// A drafted candidate.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Candidate {
    /// Its token.
    pub token: u32,
    /// Its parent in the pool (`None` for the root).
    pub parent: Option<usize>,
    /// Tokens past the root.
    pub depth: usize,
    /// Cumulative log-probability of its path under the head.
    pub score: f32,
}

/// The candidates drafted so far; index 0 is the root.
#[derive(Debug)]
pub(crate) struct DraftPool {
    pub candidates: Vec<Candidate>,
    top_k: usize,
}

impl DraftPool {
    /// A pool holding only the root (the token already chosen).
    pub fn new(root: u32, top_k: usize) -> Self {
        DraftPool {
            candidates: vec![Candidate {
                token: root,
                parent: None,
                depth: 0,
                score: 0.0,
            }],
            top_k,
        }
    }

    /// Adds the head's most likely tokens after candidate `parent` (the first `top_k`
    /// of `top`, scored by their log-probabilities) as its children.
    pub fn add_children(&mut self, parent: usize, top: &TopLogits) {
        let (depth, base) = {
            let p = &self.candidates[parent];
            (p.depth + 1, p.score)
        };
        for (token, logp) in top.log_probs().take(self.top_k) {
            self.candidates.push(Candidate {
                token,
                parent: Some(parent),
                depth,
                score: base + logp,
            });
        }
    }

    /// The `top_k` best candidates at `depth`, best first: the nodes the head expands
    /// next.
    pub fn frontier(&self, depth: usize) -> Vec<usize> {
        let mut at: Vec<usize> = (0..self.candidates.len())
            .filter(|&i| self.candidates[i].depth == depth)
            .collect();
        at.sort_by(|&a, &b| self.rank(a, b));
        at.truncate(self.top_k);
        at
    }

    fn rank(&self, a: usize, b: usize) -> std::cmp::Ordering {
        let (x, y) = (&self.candidates[a], &self.candidates[b]);
        (y.score.total_cmp(&x.score))
            .then(x.depth.cmp(&y.depth))
            .then(a.cmp(&b))
    }

    /// The tree of the root and the best `nodes − 1` candidates: pool indices in tree
    /// order (by depth, best first within a depth: parents before children, likelier
    /// siblings first) and each tree node's parent as a tree index.
    pub fn select(&self, nodes: usize) -> (Vec<usize>, Vec<Option<u32>>) {
        let mut order: Vec<usize> = (1..self.candidates.len()).collect();
        order.sort_by(|&a, &b| self.rank(a, b));
        let mut chosen = vec![false; self.candidates.len()];
        chosen[0] = true;
        let mut picked = vec![0];
        for i in order {
            if picked.len() == nodes {
                break;
            }
            let parent = self.candidates[i].parent.expect("only the root has none");
            // Closed under ancestors by construction; the check keeps it so even for
            // NaN scores.
            if chosen[parent] {
                chosen[i] = true;
                picked.push(i);
            }
        }
        picked.sort_by(|&a, &b| {
            (self.candidates[a].depth.cmp(&self.candidates[b].depth)).then(self.rank(a, b))
        });
        let mut tree_index = vec![u32::MAX; self.candidates.len()];
        for (t, &i) in picked.iter().enumerate() {
            tree_index[i] = t as u32;
        }
        let parents = (picked.iter())
            .map(|&i| self.candidates[i].parent.map(|p| tree_index[p]))
            .collect();
        (picked, parents)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    /// The children `logits` give candidate `parent`.
    fn add(pool: &mut DraftPool, parent: usize, logits: &[f32]) {
        let top = TopLogits::of(logits, pool.top_k);
        pool.add_children(parent, &top);
    }

    #[test]
    fn the_best_candidates_form_a_tree_in_depth_order() {
        let mut pool = DraftPool::new(7, 2);
        // Root's children: token 1 (p = 0.6), token 0 (p = 0.3).
        let l = [0.3f32.ln(), 0.6f32.ln(), 0.1f32.ln()];
        add(&mut pool, 0, &l);
        assert_eq!(pool.frontier(1), vec![1, 2]);
        // Child 1 (token 1) is very sure of token 2; child 2 (token 0) is unsure.
        add(&mut pool, 1, &[-9.0, -9.0, 0.0]);
        add(&mut pool, 2, &[0.0, 0.0, 0.0]);
        // Scores: c3 = ln .6 + ~0 (token 2), c4 = ln .6 − 9 (token 0), c5, c6 =
        // ln .3 + ln ⅓ (tokens 0, 1).
        let (picked, parents) = pool.select(4);
        assert_eq!(picked, vec![0, 1, 2, 3]);
        assert_eq!(parents, vec![None, Some(0), Some(0), Some(1)]);
        let (picked, parents) = pool.select(6);
        assert_eq!(picked, vec![0, 1, 2, 3, 5, 6]);
        assert_eq!(parents[4..], [Some(2), Some(2)]);
        // A chain: top-1.
        let mut chain = DraftPool::new(7, 1);
        add(&mut chain, 0, &l);
        add(&mut chain, 1, &[0.0, 1.0, 0.0]);
        let (picked, parents) = chain.select(10);
        assert_eq!(picked, vec![0, 1, 2]);
        assert_eq!(parents, vec![None, Some(0), Some(1)]);
    }
}
