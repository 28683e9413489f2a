//! What volguard registers in the apiserver beside its webhooks, generated from the rule table:
//! the CEL policies of the rows that need no other object (`policies`).

pub mod policies;
