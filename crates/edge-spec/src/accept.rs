//! Verification of a drafted token tree: which drafted path the target keeps, and the
//! target's own next token after it. Greedy decoding keeps the path of argmax matches;
//! sampling keeps drafts by recursive rejection sampling, so the emitted tokens are
//! distributed exactly as plain sampling from the target would emit them.

use crate::sampling::Sampler;
use crate::{Result, SpecError};
use edge_model::argmax;
use std::borrow::Cow;

/// A drafted token tree as verification sees it. Node 0 is the root: the token already
/// chosen, whose successor the target predicts first. Every other node's parent comes
/// before it (`parents[i] < i`). Children of a node are tried in index order (the
/// drafter puts the likelier first).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DraftTree {
    /// `tokens[i]` is node `i`'s token.
    pub tokens: Vec<u32>,
    /// `parents[i]` is node `i`'s parent: `None` for the root (node 0) only.
    pub parents: Vec<Option<usize>>,
}

/// What verification keeps: the accepted path of node indices (starting with 0, each
/// the child of the one before), and the target's next token after the path's last
/// node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acceptance {
    /// Accepted node indices, from the root (0) down.
    pub path: Vec<usize>,
    /// The target's token after the last node of `path`.
    pub next: u32,
}

/// Checks the shapes (`rows` values given per node, each `width` wide) and returns each
/// node's children in index order.
fn children(tree: &DraftTree, rows: usize, width: usize, vocab: usize) -> Result<Vec<Vec<usize>>> {
    let bad = |reason: String| Err(SpecError::MalformedTree { reason });
    let nodes = tree.tokens.len();
    if nodes == 0 {
        return bad("no nodes (the root is required)".into());
    }
    if tree.parents.len() != nodes {
        return bad(format!("{nodes} tokens but {} parents", tree.parents.len()));
    }
    if vocab == 0 {
        return bad("vocabulary of 0".into());
    }
    if nodes.checked_mul(width) != Some(rows) {
        return bad(format!("{rows} values for {nodes} nodes × {width}"));
    }
    let mut children = vec![Vec::new(); nodes];
    for (i, (&token, &parent)) in tree.tokens.iter().zip(&tree.parents).enumerate() {
        if token as usize >= vocab {
            return bad(format!(
                "node {i}'s token {token} is outside the vocab {vocab}"
            ));
        }
        match (i, parent) {
            (0, None) => {}
            (0, Some(p)) => return bad(format!("the root has a parent ({p})")),
            (_, Some(p)) if p < i => children[p].push(i),
            (_, p) => return bad(format!("node {i}'s parent {p:?} does not come before it")),
        }
    }
    Ok(children)
}

/// Verifies `tree` against the target. `logits` is `[nodes, vocab]`: row `i` is the
/// target's logits for the token after node `i` (given node `i`'s ancestors).
///
/// Greedy ([`Sampler::is_greedy`]): from the root, the target's choice is the argmax
/// of the node's row; a child carrying it is accepted and the walk goes on from it;
/// otherwise the walk stops and `next` is that choice. No randomness is consumed.
///
/// Sampling: recursive rejection sampling with point-mass drafts. At node `n`,
/// `p` = [`Sampler::distribution`] of row `n`. Each child `c` in order is accepted when
/// a uniform `u < p(token_c)` (the walk then restarts at `c`); otherwise `p` is
/// conditioned on "not `token_c`" ([`crate::Distribution::remove`]) and the next child
/// is tried. When every child is rejected (or there is none), `next` is drawn from the
/// residual `p`. The emitted token is distributed as `p`, for drafts x₁, x₂, …:
/// P(emit x₁) = p(x₁);
/// P(emit x₂) = (1 − p(x₁)) · p(x₂)/(1 − p(x₁)) = p(x₂); likewise for every later child;
/// any other y: P = (1 − Σᵢ p(xᵢ)) · p(y)/(1 − Σᵢ p(xᵢ)) = p(y), by the residual draw.
/// An empty residual (the children held all of `p`'s mass yet all were rejected, a
/// probability-zero event up to rounding) falls back to the last rejected child's token.
///
/// Errors: a root with a parent, a parent not before its child, `logits` not
/// `nodes × vocab`, a token outside the vocab — never a panic.
pub fn accept(
    tree: &DraftTree,
    logits: &[f32],
    vocab: usize,
    sampler: &mut Sampler,
) -> Result<Acceptance> {
    let children = children(tree, logits.len(), vocab, vocab)?;
    let row = |n: usize| &logits[n * vocab..][..vocab];
    if sampler.is_greedy() {
        let choices: Vec<u32> = (0..tree.tokens.len()).map(|n| argmax(row(n))).collect();
        return Ok(greedy_walk(tree, &children, &choices));
    }
    sampled_walk(tree, &children, sampler, |node, _| {
        Ok(Cow::Borrowed(row(node)))
    })
}

/// A constraint on the target's choices that depends on the tokens before them (a
/// grammar of tool calls): what verification under it asks.
pub trait RowFilter {
    /// Whether `token` may follow `path`: the tree's tokens from the root's child down
    /// to the node whose row is judged (empty for the root's own row).
    fn allows(&mut self, path: &[u32], token: u32) -> bool;
    /// Sets the logits of the tokens that may not follow `path` to −∞; returns how
    /// many tokens stay allowed.
    fn mask(&mut self, path: &[u32], row: &mut [f32]) -> usize;
}

/// [`accept`] with the target restricted by `filter`: each visited node's row is
/// masked for the tokens its path allows, so the emitted tokens are those plain
/// decoding under the same constraint would emit (greedily: the masked argmax, tried
/// unmasked first since it stands whenever allowed; sampling: rejection sampling
/// against the masked distribution). Errors: as [`accept`], and a row the filter
/// allows no token of.
pub fn accept_filtered(
    tree: &DraftTree,
    logits: &[f32],
    vocab: usize,
    sampler: &mut Sampler,
    filter: &mut dyn RowFilter,
) -> Result<Acceptance> {
    let children = children(tree, logits.len(), vocab, vocab)?;
    let row = |n: usize| &logits[n * vocab..][..vocab];
    let masked = |filter: &mut dyn RowFilter, node: usize, path: &[u32]| -> Result<Vec<f32>> {
        let mut r = row(node).to_vec();
        match filter.mask(path, &mut r) {
            0 => Err(SpecError::ConstraintDeadEnd),
            _ => Ok(r),
        }
    };
    if !sampler.is_greedy() {
        return sampled_walk(tree, &children, sampler, |node, path| {
            masked(filter, node, path).map(Cow::Owned)
        });
    }
    let (mut path, mut tokens, mut node) = (vec![0], Vec::new(), 0);
    loop {
        let mut choice = argmax(row(node));
        if !filter.allows(&tokens, choice) {
            choice = argmax(&masked(filter, node, &tokens)?);
        }
        match children[node].iter().find(|&&c| tree.tokens[c] == choice) {
            Some(&c) => {
                path.push(c);
                tokens.push(choice);
                node = c;
            }
            None => return Ok(Acceptance { path, next: choice }),
        }
    }
}

/// Recursive rejection sampling from the root (see [`accept`]), with `target(node,
/// path)` giving the row the target samples from after `node` (`path`: the accepted
/// tokens below the root).
fn sampled_walk<'a>(
    tree: &DraftTree,
    children: &[Vec<usize>],
    sampler: &mut Sampler,
    mut target: impl FnMut(usize, &[u32]) -> Result<Cow<'a, [f32]>>,
) -> Result<Acceptance> {
    let (mut path, mut tokens, mut node) = (vec![0], Vec::new(), 0);
    'walk: loop {
        let mut p = sampler.distribution(&target(node, &tokens)?)?;
        let mut rejected = None;
        for &c in &children[node] {
            let token = tree.tokens[c];
            if sampler.uniform() < p.prob(token) {
                path.push(c);
                tokens.push(token);
                node = c;
                continue 'walk;
            }
            p.remove(token);
            rejected = Some(token);
        }
        let next = p
            .draw(sampler.uniform())
            .or(rejected)
            .ok_or(SpecError::NothingToSample {
                reason: "the target's distribution is empty",
            })?;
        return Ok(Acceptance { path, next });
    }
}

/// Greedy verification from each node's greedy token alone (`choices[i]`: the target's
/// argmax after node `i`, e.g. what a forward pass with
/// [`edge_model::LogitRows::GreedyAll`] returns), the same walk as [`accept`] under a
/// greedy sampler, without downloading the logits. Errors: as [`accept`], with
/// `choices` not one per node.
pub fn accept_greedy(tree: &DraftTree, choices: &[u32], vocab: usize) -> Result<Acceptance> {
    let children = children(tree, choices.len(), 1, vocab)?;
    Ok(greedy_walk(tree, &children, choices))
}

/// From the root, the child carrying the node's choice, until there is none.
fn greedy_walk(tree: &DraftTree, children: &[Vec<usize>], choices: &[u32]) -> Acceptance {
    let mut path = vec![0];
    let mut node = 0;
    loop {
        let choice = choices[node];
        match children[node].iter().find(|&&c| tree.tokens[c] == choice) {
            Some(&c) => {
                path.push(c);
                node = c;
            }
            None => return Acceptance { path, next: choice },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SamplingParams;

    /// `[choices.len(), vocab]` logits whose row `i` has its maximum at `choices[i]`.
    fn rows(choices: &[u32], vocab: usize) -> Vec<f32> {
        let mut logits = vec![0.0; choices.len() * vocab];
        for (i, &c) in choices.iter().enumerate() {
            logits[i * vocab + c as usize] = 5.0;
        }
        logits
    }

    fn greedy() -> Sampler {
        Sampler::new(SamplingParams::default()).unwrap()
    }

    /// Root 9 → {1: 3, 2: 5}; 2 → {3: 1, 4: 6}; 1 → {5: 2}.
    fn tree() -> DraftTree {
        DraftTree {
            tokens: vec![9, 3, 5, 1, 6, 2],
            parents: vec![None, Some(0), Some(0), Some(2), Some(2), Some(1)],
        }
    }

    #[test]
    fn greedy_follows_matching_children_in_any_position() {
        // Row 0 picks 5 (the root's second child), row 2 picks 6 (again the second).
        let logits = rows(&[5, 0, 6, 0, 7, 0], 10);
        let a = accept(&tree(), &logits, 10, &mut greedy()).unwrap();
        assert_eq!(
            a,
            Acceptance {
                path: vec![0, 2, 4],
                next: 7
            }
        );
        // First children all the way down: 3, then 2; row 5 gives the next token.
        let logits = rows(&[3, 2, 0, 0, 0, 8], 10);
        let a = accept(&tree(), &logits, 10, &mut greedy()).unwrap();
        assert_eq!(
            a,
            Acceptance {
                path: vec![0, 1, 5],
                next: 8
            }
        );
    }

    /// The greedy tokens alone give the walk the full rows give; a wrong count is a
    /// typed error.
    #[test]
    fn greedy_tokens_alone_verify_as_their_rows() {
        for choices in [[5, 0, 6, 0, 7, 0], [3, 2, 0, 0, 0, 8], [4, 0, 0, 0, 0, 0]] {
            let full = accept(&tree(), &rows(&choices, 10), 10, &mut greedy()).unwrap();
            assert_eq!(accept_greedy(&tree(), &choices, 10).unwrap(), full);
        }
        assert!(matches!(
            accept_greedy(&tree(), &[5, 0, 6], 10),
            Err(crate::SpecError::MalformedTree { .. })
        ));
        assert!(
            accept_greedy(&tree(), &[5; 6], 6).is_err(),
            "a draft past the vocab"
        );
    }

    #[test]
    fn greedy_stops_at_the_first_mismatch() {
        let logits = rows(&[4, 0, 0, 0, 0, 0], 10);
        let a = accept(&tree(), &logits, 10, &mut greedy()).unwrap();
        assert_eq!(
            a,
            Acceptance {
                path: vec![0],
                next: 4
            }
        );
        let logits = rows(&[5, 0, 9, 0, 0, 0], 10);
        let a = accept(&tree(), &logits, 10, &mut greedy()).unwrap();
        assert_eq!(
            a,
            Acceptance {
                path: vec![0, 2],
                next: 9
            }
        );
    }

    #[test]
    fn a_root_without_children_yields_the_targets_token() {
        let tree = DraftTree {
            tokens: vec![2],
            parents: vec![None],
        };
        let a = accept(&tree, &rows(&[3], 4), 4, &mut greedy()).unwrap();
        assert_eq!(
            a,
            Acceptance {
                path: vec![0],
                next: 3
            }
        );
        let mut s = Sampler::new(SamplingParams {
            temperature: 1.0,
            ..Default::default()
        })
        .unwrap();
        let a = accept(&tree, &[0.0, -1e9, -1e9, -1e9], 4, &mut s).unwrap();
        assert_eq!(
            a,
            Acceptance {
                path: vec![0],
                next: 0
            }
        );
    }

    #[test]
    fn greedy_consumes_no_randomness() {
        let params = SamplingParams {
            seed: 5,
            ..Default::default()
        };
        let mut s = Sampler::new(params).unwrap();
        accept(&tree(), &rows(&[5, 0, 6, 0, 7, 0], 10), 10, &mut s).unwrap();
        assert_eq!(s.uniform(), Sampler::new(params).unwrap().uniform());
    }

    #[test]
    fn sampling_accepts_certain_drafts_and_rejects_impossible_ones() {
        // Root: token 1 impossible, token 3 certain; node 2 (token 3): 0 certain.
        let tree = DraftTree {
            tokens: vec![0, 1, 3, 2],
            parents: vec![None, Some(0), Some(0), Some(2)],
        };
        let mut logits = vec![-1e9f32; 4 * 4];
        logits[3] = 0.0;
        logits[2 * 4] = 0.0;
        let mut s = Sampler::new(SamplingParams {
            temperature: 0.7,
            seed: 3,
            ..Default::default()
        })
        .unwrap();
        for _ in 0..100 {
            let a = accept(&tree, &logits, 4, &mut s).unwrap();
            assert_eq!(
                a,
                Acceptance {
                    path: vec![0, 2],
                    next: 0
                }
            );
        }
    }

    #[test]
    fn bad_shapes_are_errors() {
        let ok = tree();
        let logits = rows(&[0; 6], 10);
        let mut s = greedy();
        assert!(accept(&ok, &logits, 10, &mut s).is_ok());
        let mut root_with_parent = ok.clone();
        root_with_parent.parents[0] = Some(0);
        let mut self_parent = ok.clone();
        self_parent.parents[3] = Some(3);
        let mut later_parent = ok.clone();
        later_parent.parents[1] = Some(4);
        let mut second_root = ok.clone();
        second_root.parents[2] = None;
        let mut big_token = ok.clone();
        big_token.tokens[4] = 10;
        let mut short_parents = ok.clone();
        short_parents.parents.pop();
        for bad in [
            root_with_parent,
            self_parent,
            later_parent,
            second_root,
            big_token,
            short_parents,
            DraftTree::default(),
        ] {
            let err = accept(&bad, &logits, 10, &mut s).unwrap_err();
            assert!(matches!(err, SpecError::MalformedTree { .. }), "{bad:?}");
        }
        assert!(matches!(
            accept(&ok, &logits[..50], 10, &mut s),
            Err(crate::SpecError::MalformedTree { .. })
        ));
        assert!(matches!(
            accept(&ok, &logits, 9, &mut s),
            Err(crate::SpecError::MalformedTree { .. })
        ));
        assert!(matches!(
            accept(&ok, &[], 0, &mut s),
            Err(crate::SpecError::MalformedTree { .. })
        ));
    }

    /// Forbids one token after one path (the rest allowed), counting what it is asked.
    struct Forbid {
        path: Vec<u32>,
        token: u32,
        masks: usize,
    }

    impl RowFilter for Forbid {
        fn allows(&mut self, path: &[u32], token: u32) -> bool {
            !(path == self.path.as_slice() && token == self.token)
        }

        fn mask(&mut self, path: &[u32], row: &mut [f32]) -> usize {
            self.masks += 1;
            if path == self.path.as_slice() {
                row[self.token as usize] = f32::NEG_INFINITY;
            }
            row.iter().filter(|l| l.is_finite()).count()
        }
    }

    #[test]
    fn a_filter_redirects_the_target_where_it_forbids_its_choice() {
        // Unfiltered: 9 → 5 → 6, then 7. Forbidding 6 after [5] makes row 2's masked
        // argmax (the next best, 1) the choice: the first child, then row 3's 4.
        let mut logits = rows(&[5, 0, 6, 4, 7, 0], 10);
        logits[2 * 10 + 1] = 3.0;
        let mut f = Forbid {
            path: vec![5],
            token: 6,
            masks: 0,
        };
        let a = accept_filtered(&tree(), &logits, 10, &mut greedy(), &mut f).unwrap();
        assert_eq!(
            a,
            Acceptance {
                path: vec![0, 2, 3],
                next: 4
            }
        );
        assert_eq!(
            f.masks, 1,
            "only the row whose argmax was forbidden is masked"
        );
        // A filter that forbids nothing on the path walks as `accept` does.
        let mut none = Forbid {
            path: vec![7, 7],
            token: 0,
            masks: 0,
        };
        let plain = accept(&tree(), &logits, 10, &mut greedy()).unwrap();
        let filtered = accept_filtered(&tree(), &logits, 10, &mut greedy(), &mut none).unwrap();
        assert_eq!(filtered, plain);
        // Sampling never emits the forbidden token, though the row favours it.
        let mut favour = vec![0.0; 6 * 10];
        favour[5] = 6.0;
        for seed in 0..200 {
            let params = SamplingParams {
                temperature: 1.0,
                seed,
                ..SamplingParams::default()
            };
            let mut s = Sampler::new(params).unwrap();
            let mut f = Forbid {
                path: vec![],
                token: 5,
                masks: 0,
            };
            let a = accept_filtered(&tree(), &favour, 10, &mut s, &mut f).unwrap();
            assert!(a.path.len() == 1 || a.path[1] == 1, "{a:?}");
            assert!(a.path.len() > 1 || a.next != 5, "{a:?}");
        }
        // A row the filter leaves empty is an error.
        let mut all = Forbid {
            path: vec![],
            token: 5,
            masks: 0,
        };
        let one = DraftTree {
            tokens: vec![9],
            parents: vec![None],
        };
        let mut only_five = vec![f32::NEG_INFINITY; 10];
        only_five[5] = 1.0;
        assert!(matches!(
            accept_filtered(&one, &only_five, 10, &mut greedy(), &mut all),
            Err(crate::SpecError::ConstraintDeadEnd)
        ));
    }
}
