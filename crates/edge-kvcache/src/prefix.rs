//! The prefix index: a radix tree over token ids whose nodes can carry a snapshot.
//!
//! Why a radix tree and not chained block hashes: snapshots sit at arbitrary token
//! positions (the end of a prompt, a message boundary), not only at block boundaries,
//! and a lookup wants the longest prefix that has one. A tree walk compares the
//! prompt's tokens once, finds every snapshot on the path, and needs no hash
//! collision handling; edges are compressed, so a long prompt is a handful of nodes.

use std::collections::HashMap;

/// A node id; the root is 0.
pub(crate) type NodeId = usize;

#[derive(Debug, Default)]
struct Node {
    parent: NodeId,
    /// Tokens on the edge from the parent.
    edge: Vec<u32>,
    /// Children by the first token of their edge.
    children: HashMap<u32, NodeId>,
    /// The snapshot stored at this depth, if any.
    entry: Option<u64>,
}

/// Token-keyed radix tree whose nodes hold entry ids.
#[derive(Debug)]
pub(crate) struct RadixTree {
    nodes: Vec<Node>,
    free: Vec<NodeId>,
}

impl Default for RadixTree {
    fn default() -> Self {
        RadixTree {
            nodes: vec![Node::default()],
            free: Vec::new(),
        }
    }
}

impl RadixTree {
    fn alloc(&mut self, node: Node) -> NodeId {
        match self.free.pop() {
            Some(id) => {
                self.nodes[id] = node;
                id
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        }
    }

    /// The node at exactly `tokens`, created (splitting an edge if needed).
    pub fn insert(&mut self, tokens: &[u32]) -> NodeId {
        let mut at = 0;
        let mut done = 0;
        while done < tokens.len() {
            let Some(&child) = self.nodes[at].children.get(&tokens[done]) else {
                let node = Node {
                    parent: at,
                    edge: tokens[done..].to_vec(),
                    ..Node::default()
                };
                let id = self.alloc(node);
                self.nodes[at].children.insert(tokens[done], id);
                return id;
            };
            let edge = &self.nodes[child].edge;
            let common = edge
                .iter()
                .zip(&tokens[done..])
                .take_while(|(a, b)| a == b)
                .count();
            if common < edge.len() {
                // Split the child's edge at `common`: a new middle node takes the
                // shared part.
                let middle = Node {
                    parent: at,
                    edge: edge[..common].to_vec(),
                    children: HashMap::from([(edge[common], child)]),
                    entry: None,
                };
                let mid = self.alloc(middle);
                let c = &mut self.nodes[child];
                c.edge.drain(..common);
                c.parent = mid;
                self.nodes[at].children.insert(tokens[done], mid);
                at = mid;
            } else {
                at = child;
            }
            done += common;
        }
        at
    }

    /// The entries on the path of `tokens`, shallowest first: every node whose whole
    /// edge matches lies on the path.
    pub fn entries_on_path(&self, tokens: &[u32]) -> Vec<(usize, u64)> {
        let mut out = Vec::new();
        let mut at = 0;
        let mut done = 0;
        while done < tokens.len() {
            let Some(&child) = self.nodes[at].children.get(&tokens[done]) else {
                break;
            };
            let edge = &self.nodes[child].edge;
            if edge.len() > tokens.len() - done || edge[..] != tokens[done..done + edge.len()] {
                break;
            }
            done += edge.len();
            at = child;
            if let Some(e) = self.nodes[at].entry {
                out.push((done, e));
            }
        }
        out
    }

    /// Sets the entry of `node`, returning the one it replaces.
    pub fn set_entry(&mut self, node: NodeId, entry: u64) -> Option<u64> {
        self.nodes[node].entry.replace(entry)
    }

    /// Removes `node`'s entry and prunes nodes left with neither an entry nor
    /// children; a node left with one child and no entry is merged into it.
    pub fn remove_entry(&mut self, node: NodeId) {
        self.nodes[node].entry = None;
        let mut at = node;
        while at != 0 && self.nodes[at].entry.is_none() {
            let n = &self.nodes[at];
            match n.children.len() {
                0 => {
                    let (parent, first) = (n.parent, n.edge[0]);
                    self.nodes[parent].children.remove(&first);
                    self.release(at);
                    at = parent;
                }
                1 => {
                    let child = *n.children.values().next().expect("one child");
                    let (parent, first) = (n.parent, n.edge[0]);
                    let mut edge = std::mem::take(&mut self.nodes[at].edge);
                    edge.extend_from_slice(&self.nodes[child].edge);
                    let c = &mut self.nodes[child];
                    c.edge = edge;
                    c.parent = parent;
                    self.nodes[parent].children.insert(first, child);
                    self.release(at);
                    break;
                }
                _ => break,
            }
        }
    }

    fn release(&mut self, id: NodeId) {
        self.nodes[id] = Node::default();
        self.free.push(id);
    }

    /// Live nodes besides the root (for tests and stats).
    pub fn node_count(&self) -> usize {
        self.nodes.len() - 1 - self.free.len()
    }

    /// Tokens stored on edges (the index's own memory, in tokens).
    #[cfg(test)]
    pub fn edge_tokens(&self) -> usize {
        self.nodes.iter().map(|n| n.edge.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_split_lookup_and_prune() {
        let mut t = RadixTree::default();
        let a = t.insert(&[1, 2, 3, 4, 5]);
        t.set_entry(a, 10);
        let b = t.insert(&[1, 2, 3]);
        t.set_entry(b, 11);
        let c = t.insert(&[1, 2, 9]);
        t.set_entry(c, 12);
        assert_eq!(
            t.entries_on_path(&[1, 2, 3, 4, 5, 6]),
            vec![(3, 11), (5, 10)]
        );
        assert_eq!(t.entries_on_path(&[1, 2, 3, 4]), vec![(3, 11)]);
        assert_eq!(t.entries_on_path(&[1, 2, 9]), vec![(3, 12)]);
        assert_eq!(t.entries_on_path(&[1, 2]), vec![]);
        assert_eq!(t.entries_on_path(&[7]), vec![]);
        // Replacing returns the old entry.
        assert_eq!(t.set_entry(b, 13), Some(11));
        t.remove_entry(b);
        assert_eq!(t.entries_on_path(&[1, 2, 3, 4, 5]), vec![(5, 10)]);
        t.remove_entry(a);
        t.remove_entry(c);
        assert_eq!(t.node_count(), 0);
        assert_eq!(t.edge_tokens(), 0);
    }

    #[test]
    fn merging_keeps_deeper_entries_reachable() {
        let mut t = RadixTree::default();
        let long = t.insert(&[5, 6, 7, 8]);
        t.set_entry(long, 1);
        let short = t.insert(&[5, 6]);
        t.set_entry(short, 2);
        let other = t.insert(&[5, 6, 1]);
        t.set_entry(other, 3);
        t.remove_entry(other);
        t.remove_entry(short);
        assert_eq!(t.entries_on_path(&[5, 6, 7, 8]), vec![(4, 1)]);
        assert_eq!(t.node_count(), 1);
        let again = t.insert(&[5, 6, 7, 8]);
        assert_eq!(again, long);
    }
}
