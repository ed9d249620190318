//! The row type checked against the message descriptor (Flink's `PbSchemaValidationUtils`, its
//! messages) and compiled into a plan both directions walk: per column its protobuf field, its shape
//! (single, repeated, map) and the conversion of its values.

use format_common::{DataType, Field, RowType, type_string};
use prost_reflect::{EnumDescriptor, FieldDescriptor, Kind, MessageDescriptor};

/// The columns of one message (the table's, or a nested ROW's), in row order.
#[derive(Debug, Clone)]
pub struct Plan {
    pub fields: Vec<FieldPlan>,
    /// Indexes into `fields` in field-number order: the order Java and Python serialize in.
    pub by_number: Vec<usize>,
    /// Names of the message's `required` fields (proto2), checked when encoding.
    pub required: Vec<FieldDescriptor>,
}

/// A column and the protobuf field it reads and writes.
#[derive(Debug, Clone)]
pub struct FieldPlan {
    pub fd: FieldDescriptor,
    pub shape: Shape,
}

/// How a field holds its values.
#[derive(Debug, Clone)]
pub enum Shape {
    Single(Conv),
    /// `repeated` (not a map): ARRAY of the element conversion.
    List(Conv),
    /// `map<k, v>`: MAP of key and value conversions.
    Map(Conv, Conv),
}

/// The conversion of one protobuf value to and from a SQL value.
#[derive(Debug, Clone)]
pub enum Conv {
    Bool,
    /// int32, uint32 (bits as INT, as Java's `int`), sint32, fixed32, sfixed32.
    Int(Kind),
    /// int64, uint64 (bits as BIGINT, as Java's `long`), sint64, fixed64, sfixed64.
    Long(Kind),
    Float,
    Double,
    String,
    Bytes,
    /// An enum read and written by its value name (CHAR/VARCHAR/STRING).
    EnumName(EnumDescriptor),
    /// An enum read and written by its number, in the column's integer width.
    EnumNumber(EnumDescriptor, Width),
    /// A message as a ROW.
    Row(MessageDescriptor, Box<Plan>),
}

/// The SQL integer type of an enum number.
#[derive(Debug, Clone, Copy)]
pub enum Width {
    Tinyint,
    Smallint,
    Int,
    Bigint,
}

impl Plan {
    /// Checks `row_type`'s columns against `message` and plans them.
    pub fn new(message: &MessageDescriptor, row_type: &RowType) -> Result<Plan, String> {
        plan_fields(message, row_type, &row_type.fields)
    }
}

fn plan_fields(
    message: &MessageDescriptor,
    rt: &RowType,
    fields: &[Field],
) -> Result<Plan, String> {
    let mut planned = Vec::with_capacity(fields.len());
    for f in fields {
        let Some(fd) = message.get_field_by_name(&f.name) else {
            return Err(format!(
                "Column {} does not exists in definition of proto class.",
                f.name
            ));
        };
        let shape = shape(&fd, rt, f.type_index as usize)?;
        planned.push(FieldPlan { fd, shape });
    }
    let mut by_number: Vec<usize> = (0..planned.len()).collect();
    by_number.sort_by_key(|&i| planned[i].fd.number());
    let required = message
        .fields()
        .filter(|f| f.cardinality() == prost_reflect::Cardinality::Required)
        .collect();
    Ok(Plan {
        fields: planned,
        by_number,
        required,
    })
}

fn node(rt: &RowType, ty: usize) -> &DataType {
    &rt.types[ty].data_type
}

/// Flink's `validateTypeMatch(FieldDescriptor, LogicalType)`.
fn shape(fd: &FieldDescriptor, rt: &RowType, ty: usize) -> Result<Shape, String> {
    if fd.is_map() {
        let DataType::Map(m) = node(rt, ty) else {
            return Err(format!(
                "Unexpected LogicalType: {}. It should be MapType",
                type_string(rt, ty)
            ));
        };
        let Kind::Message(entry) = fd.kind() else {
            return Err("a map field without its entry message".into());
        };
        let key = simple(&entry.map_entry_key_field().kind(), rt, m.key as usize)?;
        let value = single(&entry.map_entry_value_field(), rt, m.value as usize)?;
        return Ok(Shape::Map(key, value));
    }
    if fd.is_list() {
        let DataType::Array(e) = node(rt, ty) else {
            return Err(format!(
                "Unexpected LogicalType: {}. It should be ArrayType",
                type_string(rt, ty)
            ));
        };
        let e = *e as usize;
        return Ok(Shape::List(match fd.kind() {
            Kind::Message(m) => match node(rt, e) {
                DataType::Row(fields) => {
                    Conv::Row(m.clone(), Box::new(plan_fields(&m, rt, fields)?))
                }
                _ => {
                    return Err(format!(
                        "Unexpected logicalType: {}. It should be RowType",
                        type_string(rt, e)
                    ));
                }
            },
            kind => simple(&kind, rt, e)?,
        }));
    }
    Ok(Shape::Single(single(fd, rt, ty)?))
}

/// A non-repeated field: a message as a ROW, anything else a simple type.
fn single(fd: &FieldDescriptor, rt: &RowType, ty: usize) -> Result<Conv, String> {
    match fd.kind() {
        Kind::Message(m) => match node(rt, ty) {
            DataType::Row(fields) => {
                Ok(Conv::Row(m.clone(), Box::new(plan_fields(&m, rt, fields)?)))
            }
            _ => Err(format!(
                "Unexpected LogicalType: {}. It should be RowType",
                type_string(rt, ty)
            )),
        },
        kind => simple(&kind, rt, ty),
    }
}

/// Flink's `validateSimpleType` and its `TYPE_MATCH_MAP`.
fn simple(kind: &Kind, rt: &RowType, ty: usize) -> Result<Conv, String> {
    let t = node(rt, ty);
    let conv = match (kind, t) {
        (Kind::Bool, DataType::Boolean) => Some(Conv::Bool),
        (
            Kind::Int32 | Kind::Uint32 | Kind::Sint32 | Kind::Fixed32 | Kind::Sfixed32,
            DataType::Int,
        ) => Some(Conv::Int(kind.clone())),
        (
            Kind::Int64 | Kind::Uint64 | Kind::Sint64 | Kind::Fixed64 | Kind::Sfixed64,
            DataType::Bigint,
        ) => Some(Conv::Long(kind.clone())),
        (Kind::Float, DataType::Float) => Some(Conv::Float),
        (Kind::Double, DataType::Double) => Some(Conv::Double),
        (Kind::String, DataType::Varchar(_) | DataType::Char(_)) => Some(Conv::String),
        (Kind::Bytes, DataType::Binary(_) | DataType::Varbinary(_)) => Some(Conv::Bytes),
        (Kind::Enum(e), DataType::Varchar(_) | DataType::Char(_)) => {
            Some(Conv::EnumName(e.clone()))
        }
        (Kind::Enum(e), DataType::Tinyint) => Some(Conv::EnumNumber(e.clone(), Width::Tinyint)),
        (Kind::Enum(e), DataType::Smallint) => Some(Conv::EnumNumber(e.clone(), Width::Smallint)),
        (Kind::Enum(e), DataType::Int) => Some(Conv::EnumNumber(e.clone(), Width::Int)),
        (Kind::Enum(e), DataType::Bigint) => Some(Conv::EnumNumber(e.clone(), Width::Bigint)),
        _ => None,
    };
    conv.ok_or_else(|| {
        if let Kind::Message(_) = kind {
            return "Unsupported protobuf java type: MESSAGE".to_owned();
        }
        format!(
            "Protobuf field type does not match column type, {}(protobuf) is not compatible of {}",
            java_type(kind),
            type_root(t)
        )
    })
}

/// Java's `FieldDescriptor.JavaType` name of a protobuf type.
pub fn java_type(kind: &Kind) -> &'static str {
    match kind {
        Kind::Double => "DOUBLE",
        Kind::Float => "FLOAT",
        Kind::Int32 | Kind::Uint32 | Kind::Sint32 | Kind::Fixed32 | Kind::Sfixed32 => "INT",
        Kind::Int64 | Kind::Uint64 | Kind::Sint64 | Kind::Fixed64 | Kind::Sfixed64 => "LONG",
        Kind::Bool => "BOOLEAN",
        Kind::String => "STRING",
        Kind::Bytes => "BYTE_STRING",
        Kind::Enum(_) => "ENUM",
        Kind::Message(_) => "MESSAGE",
    }
}

/// Flink's `LogicalTypeRoot` name of a SQL type.
pub fn type_root(t: &DataType) -> &'static str {
    match t {
        DataType::Boolean => "BOOLEAN",
        DataType::Tinyint => "TINYINT",
        DataType::Smallint => "SMALLINT",
        DataType::Int => "INTEGER",
        DataType::Bigint => "BIGINT",
        DataType::Float => "FLOAT",
        DataType::Double => "DOUBLE",
        DataType::Decimal(_) => "DECIMAL",
        DataType::Char(_) => "CHAR",
        DataType::Varchar(_) => "VARCHAR",
        DataType::Binary(_) => "BINARY",
        DataType::Varbinary(_) => "VARBINARY",
        DataType::Date => "DATE",
        DataType::Time(_) => "TIME_WITHOUT_TIME_ZONE",
        DataType::Timestamp(_) => "TIMESTAMP_WITHOUT_TIME_ZONE",
        DataType::TimestampLtz(_) => "TIMESTAMP_WITH_LOCAL_TIME_ZONE",
        DataType::Array(_) => "ARRAY",
        DataType::Map(_) => "MAP",
        DataType::Row(_) => "ROW",
    }
}
