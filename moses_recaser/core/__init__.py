"""The core records and their pure functions: the (F, e, A) triple, casing, vocabularies and packed key sets,
named columns, sentences a batch at a time, the signature, the memory setting and the worker processes every
floor above uses. Nothing here reads or writes the user's files (that is ``io``'s)."""
