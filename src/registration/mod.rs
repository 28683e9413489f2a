//! What volguard registers in the apiserver, generated from the rule table: its webhook entries
//! (`webhooks`) and the CEL policies of the rows that need no other object (`policies`).

pub mod admission_dir;
pub mod allow_list;
pub mod args;
pub mod conditions;
pub mod drift;
pub mod failure_mode;
pub mod policies;
pub mod policies_static;
pub mod policy_table;
pub mod resource_rules;
pub mod webhooks;
pub mod webhooks_yaml;

#[cfg(test)]
mod docs_tests;
