//! What the checker reports: one [`Incompatibility`] per reason a reader schema
//! cannot read what a writer schema produces, named like Confluent's differences.

use std::fmt;

/// The kind of an incompatibility, printed in Confluent's `UPPER_SNAKE` style so
/// messages read the same as Confluent Schema Registry's and Karapace's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    TypeChanged,
    TypeNarrowed,
    SchemaAdded,
    ReferenceUnresolved,
    NestingTooDeep,
    SchemaTooComplex,
    MaxLengthAdded,
    MaxLengthDecreased,
    MinLengthAdded,
    MinLengthIncreased,
    PatternAdded,
    PatternChanged,
    FormatAdded,
    FormatChanged,
    ContentEncodingAdded,
    ContentEncodingChanged,
    ContentMediaTypeAdded,
    ContentMediaTypeChanged,
    MaximumAdded,
    MaximumDecreased,
    MinimumAdded,
    MinimumIncreased,
    ExclusiveMaximumAdded,
    ExclusiveMaximumDecreased,
    ExclusiveMinimumAdded,
    ExclusiveMinimumIncreased,
    MultipleOfAdded,
    MultipleOfExpanded,
    MultipleOfChanged,
    EnumArrayAdded,
    EnumArrayNarrowed,
    CombinedTypeChanged,
    ProductTypeExtended,
    SumTypeNarrowed,
    CombinedTypeSubschemasChanged,
    NotTypeExtended,
    MaxPropertiesAdded,
    MaxPropertiesDecreased,
    MinPropertiesAdded,
    MinPropertiesIncreased,
    AdditionalPropertiesNarrowed,
    AdditionalPropertiesRemoved,
    DependencyArrayAdded,
    DependencyArrayExtended,
    DependencySchemaAdded,
    PropertyNamesChanged,
    PatternPropertyAdded,
    PropertyRemovedFromClosedContentModel,
    PropertyRemovedNotCoveredByPartiallyOpenContentModel,
    PropertyAddedToOpenContentModel,
    PropertyAddedNotCoveredByPartiallyOpenContentModel,
    RequiredPropertyAddedToUnopenContentModel,
    RequiredAttributeAdded,
    ConditionChanged,
    ConditionBranchAdded,
    MaxItemsAdded,
    MaxItemsDecreased,
    MinItemsAdded,
    MinItemsIncreased,
    UniqueItemsAdded,
    ItemsAdded,
    ContainsAdded,
    AdditionalItemsRemoved,
    ItemRemovedFromClosedContentModel,
    ItemRemovedNotCoveredByPartiallyOpenContentModel,
    ItemAddedToOpenContentModel,
    ItemAddedNotCoveredByPartiallyOpenContentModel,
}

impl Kind {
    /// The stable name, e.g. `TYPE_CHANGED`.
    pub fn name(self) -> &'static str {
        use Kind::*;
        match self {
            TypeChanged => "TYPE_CHANGED",
            TypeNarrowed => "TYPE_NARROWED",
            SchemaAdded => "SCHEMA_ADDED",
            ReferenceUnresolved => "REFERENCE_UNRESOLVED",
            NestingTooDeep => "NESTING_TOO_DEEP",
            SchemaTooComplex => "SCHEMA_TOO_COMPLEX",
            MaxLengthAdded => "MAX_LENGTH_ADDED",
            MaxLengthDecreased => "MAX_LENGTH_DECREASED",
            MinLengthAdded => "MIN_LENGTH_ADDED",
            MinLengthIncreased => "MIN_LENGTH_INCREASED",
            PatternAdded => "PATTERN_ADDED",
            PatternChanged => "PATTERN_CHANGED",
            FormatAdded => "FORMAT_ADDED",
            FormatChanged => "FORMAT_CHANGED",
            ContentEncodingAdded => "CONTENT_ENCODING_ADDED",
            ContentEncodingChanged => "CONTENT_ENCODING_CHANGED",
            ContentMediaTypeAdded => "CONTENT_MEDIA_TYPE_ADDED",
            ContentMediaTypeChanged => "CONTENT_MEDIA_TYPE_CHANGED",
            MaximumAdded => "MAXIMUM_ADDED",
            MaximumDecreased => "MAXIMUM_DECREASED",
            MinimumAdded => "MINIMUM_ADDED",
            MinimumIncreased => "MINIMUM_INCREASED",
            ExclusiveMaximumAdded => "EXCLUSIVE_MAXIMUM_ADDED",
            ExclusiveMaximumDecreased => "EXCLUSIVE_MAXIMUM_DECREASED",
            ExclusiveMinimumAdded => "EXCLUSIVE_MINIMUM_ADDED",
            ExclusiveMinimumIncreased => "EXCLUSIVE_MINIMUM_INCREASED",
            MultipleOfAdded => "MULTIPLE_OF_ADDED",
            MultipleOfExpanded => "MULTIPLE_OF_EXPANDED",
            MultipleOfChanged => "MULTIPLE_OF_CHANGED",
            EnumArrayAdded => "ENUM_ARRAY_ADDED",
            EnumArrayNarrowed => "ENUM_ARRAY_NARROWED",
            CombinedTypeChanged => "COMBINED_TYPE_CHANGED",
            ProductTypeExtended => "PRODUCT_TYPE_EXTENDED",
            SumTypeNarrowed => "SUM_TYPE_NARROWED",
            CombinedTypeSubschemasChanged => "COMBINED_TYPE_SUBSCHEMAS_CHANGED",
            NotTypeExtended => "NOT_TYPE_EXTENDED",
            MaxPropertiesAdded => "MAX_PROPERTIES_ADDED",
            MaxPropertiesDecreased => "MAX_PROPERTIES_DECREASED",
            MinPropertiesAdded => "MIN_PROPERTIES_ADDED",
            MinPropertiesIncreased => "MIN_PROPERTIES_INCREASED",
            AdditionalPropertiesNarrowed => "ADDITIONAL_PROPERTIES_NARROWED",
            AdditionalPropertiesRemoved => "ADDITIONAL_PROPERTIES_REMOVED",
            DependencyArrayAdded => "DEPENDENCY_ARRAY_ADDED",
            DependencyArrayExtended => "DEPENDENCY_ARRAY_EXTENDED",
            DependencySchemaAdded => "DEPENDENCY_SCHEMA_ADDED",
            PropertyNamesChanged => "PROPERTY_NAMES_CHANGED",
            PatternPropertyAdded => "PATTERN_PROPERTY_ADDED",
            PropertyRemovedFromClosedContentModel => "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
            PropertyRemovedNotCoveredByPartiallyOpenContentModel => {
                "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
            }
            PropertyAddedToOpenContentModel => "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
            PropertyAddedNotCoveredByPartiallyOpenContentModel => {
                "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
            }
            RequiredPropertyAddedToUnopenContentModel => "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
            RequiredAttributeAdded => "REQUIRED_ATTRIBUTE_ADDED",
            ConditionChanged => "CONDITION_CHANGED",
            ConditionBranchAdded => "CONDITION_BRANCH_ADDED",
            MaxItemsAdded => "MAX_ITEMS_ADDED",
            MaxItemsDecreased => "MAX_ITEMS_DECREASED",
            MinItemsAdded => "MIN_ITEMS_ADDED",
            MinItemsIncreased => "MIN_ITEMS_INCREASED",
            UniqueItemsAdded => "UNIQUE_ITEMS_ADDED",
            ItemsAdded => "ITEMS_ADDED",
            ContainsAdded => "CONTAINS_ADDED",
            AdditionalItemsRemoved => "ADDITIONAL_ITEMS_REMOVED",
            ItemRemovedFromClosedContentModel => "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL",
            ItemRemovedNotCoveredByPartiallyOpenContentModel => {
                "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
            }
            ItemAddedToOpenContentModel => "ITEM_ADDED_TO_OPEN_CONTENT_MODEL",
            ItemAddedNotCoveredByPartiallyOpenContentModel => {
                "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
            }
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One reason the reader cannot read everything the writer produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incompatibility {
    /// JSON pointer to the place in the schemas, e.g. `/properties/a/type`; `/` is the root.
    pub path: String,
    pub kind: Kind,
    /// Plain-language explanation, in reader/writer terms.
    pub detail: String,
}

impl Incompatibility {
    /// `KIND: detail`, the message the registry returns.
    pub fn message(&self) -> String {
        format!("{}: {}", self.kind, self.detail)
    }
}

/// A JSON pointer under construction: the place in the schemas being compared.
#[derive(Debug, Clone, Default)]
pub struct Location {
    segments: Vec<String>,
}

impl Location {
    /// The location one level below this one.
    pub fn child(&self, segment: impl Into<String>) -> Location {
        let mut segments = self.segments.clone();
        segments.push(segment.into());
        Location { segments }
    }

    /// The RFC 6901 form, except that the root is `/` (as the other checkers write it).
    pub fn pointer(&self) -> String {
        if self.segments.is_empty() {
            return "/".to_owned();
        }
        let mut out = String::new();
        for segment in &self.segments {
            out.push('/');
            out.push_str(&segment.replace('~', "~0").replace('/', "~1"));
        }
        out
    }

    pub fn at(&self, kind: Kind, detail: impl Into<String>) -> Incompatibility {
        Incompatibility { path: self.pointer(), kind, detail: detail.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_escape_tilde_and_slash() {
        let location = Location::default().child("properties").child("a/b~c");
        assert_eq!(location.pointer(), "/properties/a~1b~0c");
        assert_eq!(Location::default().pointer(), "/");
    }

    #[test]
    fn messages_start_with_the_kind() {
        let found = Location::default().child("type").at(Kind::TypeChanged, "string is not integer");
        assert_eq!(found.message(), "TYPE_CHANGED: string is not integer");
    }
}
