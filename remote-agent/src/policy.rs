pub struct Policy;
