/** The entity store's engine; a leaf module so the migrations need not import the store that runs them. */
export type Dialect = 'sqlite' | 'postgres'
